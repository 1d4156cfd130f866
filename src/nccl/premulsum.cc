// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/premulsum.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/cuda_probe.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::nccl {
namespace {

// Elements by memcpy: NCCL takes buffers at any address, a float at an odd one included.
template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

// Integer products wrap, as NCCL's kernels do; computed unsigned to stay defined.
template <class T, class U>
void scaleInt(const void* in, void* out, size_t n, const void* scalar) {
  const U s = static_cast<U>(load<T>(scalar, 0));
  for (size_t i = 0; i < n; ++i) store<T>(out, i, static_cast<T>(static_cast<U>(load<T>(in, i)) * s));
}

template <class T>
void scaleNative(const void* in, void* out, size_t n, const void* scalar) {
  const T s = load<T>(scalar, 0);
  for (size_t i = 0; i < n; ++i) store<T>(out, i, static_cast<T>(load<T>(in, i) * s));
}

// Narrow floats: the product of two narrow values is exact in fp32, so one rounding back
// gives the same bits as multiplying in the narrow type.
template <class Bits, float (*kToFloat)(Bits), Bits (*kFromFloat)(float)>
void scaleNarrow(const void* in, void* out, size_t n, const void* scalar) {
  const float s = kToFloat(load<Bits>(scalar, 0));
  for (size_t i = 0; i < n; ++i) store<Bits>(out, i, kFromFloat(kToFloat(load<Bits>(in, i)) * s));
}

uint8_t toE4m3(float f) { return fp::floatToE4m3(f, true); }
uint8_t toE5m2(float f) { return fp::floatToE5m2(f, true); }

void scale(ncclDataType_t t, const void* in, void* out, size_t n, const void* scalar) {
  switch (t) {
    case ncclInt8:
      return scaleInt<int8_t, uint8_t>(in, out, n, scalar);
    case ncclUint8:
      return scaleInt<uint8_t, uint8_t>(in, out, n, scalar);
    case ncclInt32:
      return scaleInt<int32_t, uint32_t>(in, out, n, scalar);
    case ncclUint32:
      return scaleInt<uint32_t, uint32_t>(in, out, n, scalar);
    case ncclInt64:
      return scaleInt<int64_t, uint64_t>(in, out, n, scalar);
    case ncclUint64:
      return scaleInt<uint64_t, uint64_t>(in, out, n, scalar);
    case ncclFloat16:
      return scaleNarrow<uint16_t, fp::halfToFloat, fp::floatToHalf>(in, out, n, scalar);
    case ncclFloat32:
      return scaleNative<float>(in, out, n, scalar);
    case ncclFloat64:
      return scaleNative<double>(in, out, n, scalar);
    case ncclBfloat16:
      return scaleNarrow<uint16_t, fp::bf16ToFloat, fp::floatToBf16>(in, out, n, scalar);
    case ncclFloat8e4m3:
      return scaleNarrow<uint8_t, fp::e4m3ToFloat, toE4m3>(in, out, n, scalar);
    case ncclFloat8e5m2:
      return scaleNarrow<uint8_t, fp::e5m2ToFloat, toE5m2>(in, out, n, scalar);
    default:
      throw Error(cclInvalidArgument, "invalid datatype " + std::to_string(static_cast<int>(t)));
  }
}

size_t indexOf(ncclRedOp_t op) { return static_cast<size_t>(static_cast<int>(op) - static_cast<int>(ncclNumOps)); }

}  // namespace

// ncclDataType_t and cclDataType_t share their values; 0 for an invalid type.
size_t elementSize(ncclDataType_t t) { return dataTypeSize(static_cast<cclDataType_t>(t)); }

ncclRedOp_t PreMulSumTable::create(const void* scalar, ncclDataType_t dtype, ncclScalarResidence_t residence) {
  CCL_CHECK(elementSize(dtype) != 0, cclInvalidArgument, "invalid datatype " + std::to_string(static_cast<int>(dtype)));
  CCL_CHECK(residence == ncclScalarDevice || residence == ncclScalarHostImmediate, cclInvalidArgument,
            "invalid scalar residence " + std::to_string(static_cast<int>(residence)));
  CCL_CHECK(scalar, cclInvalidArgument, "scalar is NULL");
  PreMulSumOp op;
  op.live = true;
  op.dtype = dtype;
  op.residence = residence;
  if (residence == ncclScalarHostImmediate)
    std::memcpy(op.value, scalar, elementSize(dtype));
  else
    op.pointer = scalar;
  std::lock_guard<std::mutex> lock(mutex_);
  size_t slot = 0;
  while (slot < ops_.size() && ops_[slot].live) ++slot;
  CCL_CHECK(slot < static_cast<size_t>(ncclMaxRedOp - ncclNumOps), cclInvalidUsage, "too many reduction ops");
  if (slot == ops_.size())
    ops_.push_back(op);
  else
    ops_[slot] = op;
  return static_cast<ncclRedOp_t>(static_cast<int>(ncclNumOps) + static_cast<int>(slot));
}

PreMulSumOp PreMulSumTable::get(ncclRedOp_t op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t i = indexOf(op);
  CCL_CHECK(static_cast<int>(op) >= static_cast<int>(ncclNumOps) && i < ops_.size() && ops_[i].live, cclInvalidArgument,
            "reduction op " + std::to_string(static_cast<int>(op)) + " was not created on this communicator");
  return ops_[i];
}

void PreMulSumTable::setRealOp(ncclRedOp_t op, ncclRedOp_t real) {
  std::lock_guard<std::mutex> lock(mutex_);
  ops_[indexOf(op)].realOp = real;
  ops_[indexOf(op)].hasRealOp = true;
}

PreMulSumOp PreMulSumTable::destroy(ncclRedOp_t op) {
  PreMulSumOp old = get(op);
  std::lock_guard<std::mutex> lock(mutex_);
  ops_[indexOf(op)] = PreMulSumOp{};
  return old;
}

ReductionInput prepareReduction(const PreMulSumTable& table, ncclRedOp_t op, ncclDataType_t dtype, const void* send,
                                size_t count) {
  ReductionInput in;
  if (static_cast<int>(op) >= 0 && static_cast<int>(op) < static_cast<int>(ncclNumOps)) {
    in.send = send;
    in.op = static_cast<cclRedOp_t>(op);
    return in;
  }
  const PreMulSumOp pm = table.get(op);
  CCL_CHECK(pm.dtype == dtype, cclInvalidArgument,
            "reduction op " + std::to_string(static_cast<int>(op)) + " was created for datatype " +
                std::to_string(static_cast<int>(pm.dtype)) + ", not " + std::to_string(static_cast<int>(dtype)));
  CCL_CHECK(send || count == 0, cclInvalidArgument, "sendbuff is NULL with a count of " + std::to_string(count));
  const size_t bytes = count * elementSize(dtype);
  in.scratch = std::shared_ptr<void>(std::malloc(bytes ? bytes : 1), std::free);
  CCL_CHECK(in.scratch, cclSystemError, "out of memory for the PreMulSum input copy");
  in.send = in.scratch.get();
  in.op = cclSum;
  // The op as it is now (it may be destroyed once this call returns, as NCCL allows); a
  // device-residence scalar is read through its pointer only when `scale` runs.
  in.scale = [pm, dtype, send, count, scratch = in.scratch] {
    unsigned char scalar[8] = {};
    if (pm.residence == ncclScalarHostImmediate)
      std::memcpy(scalar, pm.value, sizeof(scalar));
    else if (cuda::isDevicePointer(pm.pointer))
      cuda::copy(scalar, pm.pointer, elementSize(dtype));
    else
      std::memcpy(scalar, pm.pointer, elementSize(dtype));
    if (count) scale(dtype, send, scratch.get(), count, scalar);
  };
  return in;
}

}  // namespace ccl::nccl
