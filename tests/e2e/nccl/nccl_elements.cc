// SPDX-License-Identifier: BSD-3-Clause
#include "nccl_elements.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace nccl_test {

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> types = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return types;
}

const char* typeName(ncclDataType_t t) {
  static const char* names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64", "uint64",
                                "float16", "float32", "float64", "bfloat16", "e4m3",  "e5m2"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "invalid";
}

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

template <class T>
static T& at(void* buf, size_t i) {
  return static_cast<T*>(buf)[i];
}
template <class T>
static const T& at(const void* buf, size_t i) {
  return static_cast<const T*>(buf)[i];
}

double get(ncclDataType_t t, const void* b, size_t i) {
  switch (t) {
    case ncclInt8:
      return at<int8_t>(b, i);
    case ncclUint8:
      return at<uint8_t>(b, i);
    case ncclInt32:
      return at<int32_t>(b, i);
    case ncclUint32:
      return at<uint32_t>(b, i);
    case ncclInt64:
      return static_cast<double>(at<int64_t>(b, i));
    case ncclUint64:
      return static_cast<double>(at<uint64_t>(b, i));
    case ncclFloat16:
      return static_cast<float>(at<__half>(b, i));
    case ncclFloat32:
      return at<float>(b, i);
    case ncclFloat64:
      return at<double>(b, i);
    case ncclBfloat16:
      return static_cast<float>(at<__nv_bfloat16>(b, i));
    case ncclFloat8e4m3:
      return static_cast<float>(at<__nv_fp8_e4m3>(b, i));
    default:
      return static_cast<float>(at<__nv_fp8_e5m2>(b, i));
  }
}

void set(ncclDataType_t t, void* b, size_t i, double v) {
  switch (t) {
    case ncclInt8:
      at<int8_t>(b, i) = static_cast<int8_t>(static_cast<int64_t>(v));
      return;
    case ncclUint8:
      at<uint8_t>(b, i) = static_cast<uint8_t>(static_cast<int64_t>(v));
      return;
    case ncclInt32:
      at<int32_t>(b, i) = static_cast<int32_t>(static_cast<int64_t>(v));
      return;
    case ncclUint32:
      at<uint32_t>(b, i) = static_cast<uint32_t>(static_cast<int64_t>(v));
      return;
    case ncclInt64:
      at<int64_t>(b, i) = static_cast<int64_t>(v);
      return;
    case ncclUint64:
      at<uint64_t>(b, i) = static_cast<uint64_t>(v);
      return;
    case ncclFloat16:
      at<__half>(b, i) = __half(static_cast<float>(v));
      return;
    case ncclFloat32:
      at<float>(b, i) = static_cast<float>(v);
      return;
    case ncclFloat64:
      at<double>(b, i) = v;
      return;
    case ncclBfloat16:
      at<__nv_bfloat16>(b, i) = __nv_bfloat16(static_cast<float>(v));
      return;
    case ncclFloat8e4m3:
      at<__nv_fp8_e4m3>(b, i) = __nv_fp8_e4m3(static_cast<float>(v));
      return;
    default:
      at<__nv_fp8_e5m2>(b, i) = __nv_fp8_e5m2(static_cast<float>(v));
      return;
  }
}

std::vector<unsigned char> filled(ncclDataType_t t, size_t count, const std::function<double(size_t)>& f) {
  std::vector<unsigned char> out(count * typeSize(t) + 1);  // +1: never a zero-size buffer
  for (size_t i = 0; i < count; ++i) set(t, out.data(), i, f(i));
  return out;
}

}  // namespace nccl_test
