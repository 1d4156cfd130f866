// SPDX-License-Identifier: BSD-3-Clause
#include "harness/datatypes.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace cclperf {
namespace {

constexpr int64_t kIntLimit = int64_t{1} << 24;  // keeps every expected value exact in a double

const std::vector<DataTypeInfo> kTypes = {
    {cclInt8, "int8", 1, 126},           {cclUint8, "uint8", 1, 254},         {cclInt32, "int32", 4, kIntLimit},
    {cclUint32, "uint32", 4, kIntLimit}, {cclInt64, "int64", 8, kIntLimit},   {cclUint64, "uint64", 8, kIntLimit},
    {cclFloat16, "half", 2, 2048},       {cclFloat32, "float", 4, kIntLimit}, {cclFloat64, "double", 8, kIntLimit},
    {cclBfloat16, "bfloat16", 2, 256},   {cclFloat8e4m3, "f8e4m3", 1, 16},    {cclFloat8e5m2, "f8e5m2", 1, 8},
};

struct Alias {
  const char* name;
  cclDataType_t type;
};
constexpr std::array<Alias, 11> kAliases = {{{"char", cclInt8},
                                             {"int", cclInt32},
                                             {"float16", cclFloat16},
                                             {"fp16", cclFloat16},
                                             {"float32", cclFloat32},
                                             {"fp32", cclFloat32},
                                             {"float64", cclFloat64},
                                             {"fp64", cclFloat64},
                                             {"bf16", cclBfloat16},
                                             {"fp8e4m3", cclFloat8e4m3},
                                             {"fp8e5m2", cclFloat8e5m2}}};

// Generic decoder of a sign/exponent/mantissa format. `ieeeSpecials`: an all-ones
// exponent means Inf/NaN (fp16, bf16, e5m2); e4m3 has only S.1111.111 as NaN.
double decodeMinifloat(uint32_t bits, int exponentBits, int mantissaBits, bool ieeeSpecials) {
  const uint32_t mant = bits & ((1u << mantissaBits) - 1);
  const uint32_t exp = (bits >> mantissaBits) & ((1u << exponentBits) - 1);
  const bool negative = (bits >> (mantissaBits + exponentBits)) & 1u;
  const int bias = (1 << (exponentBits - 1)) - 1;
  const uint32_t expMax = (1u << exponentBits) - 1;
  if (ieeeSpecials && exp == expMax) return std::numeric_limits<double>::quiet_NaN();
  if (!ieeeSpecials && exp == expMax && mant == (1u << mantissaBits) - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double value = exp == 0 ? std::ldexp(double(mant), 1 - bias - mantissaBits)
                          : std::ldexp(1.0 + double(mant) / double(1u << mantissaBits), int(exp) - bias);
  return negative ? -value : value;
}

// 16-bit types decode through a table: checks read up to 64 M elements.
template <int E, int M>
const std::vector<float>& decodeTable16() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = float(decodeMinifloat(b, E, M, true));
    return t;
  }();
  return table;
}

template <typename T>
T loadAs(const void* data, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void storeAs(void* data, size_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

const std::vector<DataTypeInfo>& allDataTypes() { return kTypes; }

const DataTypeInfo& dataTypeInfo(cclDataType_t type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info;
  }
  throw std::invalid_argument("unknown data type " + std::to_string(int(type)));
}

std::vector<cclDataType_t> parseDataTypes(const std::string& text) {
  if (text == "all") {
    std::vector<cclDataType_t> types;
    for (const auto& info : kTypes) types.push_back(info.type);
    return types;
  }
  for (const auto& info : kTypes) {
    if (text == info.name) return {info.type};
  }
  for (const auto& alias : kAliases) {
    if (text == alias.name) return {alias.type};
  }
  throw std::invalid_argument("unknown data type '" + text +
                              "' (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 "
                              "f8e5m2 all)");
}

uint32_t encodeMinifloat(double value, int exponentBits, int mantissaBits) {
  if (value == 0.0) return 0;
  if (!(value > 0.0)) throw std::logic_error("minifloat encoder handles non-negative values only");
  int e = 0;
  const double f = std::frexp(value, &e);  // value = f * 2^e, f in [0.5, 1)
  const int bias = (1 << (exponentBits - 1)) - 1;
  const int expField = e - 1 + bias;
  const double mant = (f * 2.0 - 1.0) * double(1u << mantissaBits);
  if (expField <= 0 || expField >= (1 << exponentBits) || mant != std::floor(mant)) {
    throw std::logic_error("value " + std::to_string(value) + " is not exact in the minifloat format");
  }
  return (uint32_t(expField) << mantissaBits) | uint32_t(mant);
}

double loadElement(const TypedBuffer& buf, size_t i) {
  switch (buf.type) {
    case cclInt8:
      return loadAs<int8_t>(buf.data, i);
    case cclUint8:
      return loadAs<uint8_t>(buf.data, i);
    case cclInt32:
      return loadAs<int32_t>(buf.data, i);
    case cclUint32:
      return loadAs<uint32_t>(buf.data, i);
    case cclInt64:
      return double(loadAs<int64_t>(buf.data, i));
    case cclUint64:
      return double(loadAs<uint64_t>(buf.data, i));
    case cclFloat16:
      return decodeTable16<5, 10>()[loadAs<uint16_t>(buf.data, i)];
    case cclFloat32:
      return loadAs<float>(buf.data, i);
    case cclFloat64:
      return loadAs<double>(buf.data, i);
    case cclBfloat16:
      return decodeTable16<8, 7>()[loadAs<uint16_t>(buf.data, i)];
    case cclFloat8e4m3:
      return decodeMinifloat(loadAs<uint8_t>(buf.data, i), 4, 3, false);
    case cclFloat8e5m2:
      return decodeMinifloat(loadAs<uint8_t>(buf.data, i), 5, 2, true);
    default:
      throw std::invalid_argument("unknown data type");
  }
}

void storeElement(const TypedBuffer& buf, size_t i, double value) {
  switch (buf.type) {
    case cclInt8:
      return storeAs<int8_t>(buf.data, i, int8_t(value));
    case cclUint8:
      return storeAs<uint8_t>(buf.data, i, uint8_t(value));
    case cclInt32:
      return storeAs<int32_t>(buf.data, i, int32_t(value));
    case cclUint32:
      return storeAs<uint32_t>(buf.data, i, uint32_t(value));
    case cclInt64:
      return storeAs<int64_t>(buf.data, i, int64_t(value));
    case cclUint64:
      return storeAs<uint64_t>(buf.data, i, uint64_t(value));
    case cclFloat16:
      return storeAs<uint16_t>(buf.data, i, uint16_t(encodeMinifloat(value, 5, 10)));
    case cclFloat32:
      return storeAs<float>(buf.data, i, float(value));
    case cclFloat64:
      return storeAs<double>(buf.data, i, value);
    case cclBfloat16:
      return storeAs<uint16_t>(buf.data, i, uint16_t(encodeMinifloat(value, 8, 7)));
    case cclFloat8e4m3:
      return storeAs<uint8_t>(buf.data, i, uint8_t(encodeMinifloat(value, 4, 3)));
    case cclFloat8e5m2:
      return storeAs<uint8_t>(buf.data, i, uint8_t(encodeMinifloat(value, 5, 2)));
    default:
      throw std::invalid_argument("unknown data type");
  }
}

void poison(const TypedBuffer& buf) { std::memset(buf.data, 0xff, buf.count * dataTypeInfo(buf.type).size); }

}  // namespace cclperf
