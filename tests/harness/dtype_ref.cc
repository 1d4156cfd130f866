// SPDX-License-Identifier: BSD-3-Clause
#include "dtype_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ccltest {

namespace {

constexpr double kNoLimit = 0;

const std::vector<DtypeInfo>& table() {
  static const std::vector<DtypeInfo> t = {
      {cclInt8, "int8", 1, Kind::kSigned, 0, 0, false, kNoLimit},
      {cclUint8, "uint8", 1, Kind::kUnsigned, 0, 0, false, kNoLimit},
      {cclInt32, "int32", 4, Kind::kSigned, 0, 0, false, kNoLimit},
      {cclUint32, "uint32", 4, Kind::kUnsigned, 0, 0, false, kNoLimit},
      {cclInt64, "int64", 8, Kind::kSigned, 0, 0, false, kNoLimit},
      {cclUint64, "uint64", 8, Kind::kUnsigned, 0, 0, false, kNoLimit},
      {cclFloat16, "float16", 2, Kind::kFloat, 5, 10, true, 2048, true},
      {cclFloat32, "float32", 4, Kind::kFloat, 8, 23, true, 16777216.0},
      {cclFloat64, "float64", 8, Kind::kFloat, 11, 52, true, 9007199254740992.0},
      {cclBfloat16, "bfloat16", 2, Kind::kFloat, 8, 7, true, 256},
      {cclFloat8e4m3, "fp8e4m3", 1, Kind::kFloat, 4, 3, false, 16, true},
      {cclFloat8e5m2, "fp8e5m2", 1, Kind::kFloat, 5, 2, true, 8, true},
  };
  return t;
}

struct Narrow {
  int e, m;
  bool ieee;
  int bias() const { return (1 << (e - 1)) - 1; }
  uint64_t expMax() const { return (uint64_t{1} << e) - 1; }
  uint64_t manMax() const { return (uint64_t{1} << m) - 1; }
  uint64_t signBit() const { return uint64_t{1} << (e + m); }
  uint64_t maxFinite() const { return ieee ? ((expMax() - 1) << m) | manMax() : (expMax() << m) | (manMax() - 1); }
  uint64_t nanCode() const { return ieee ? (expMax() << m) | (uint64_t{1} << (m - 1)) : (expMax() << m) | manMax(); }
  uint64_t overflowCode() const { return ieee ? expMax() << m : nanCode(); }
};

Narrow narrowOf(const DtypeInfo& d) { return Narrow{d.expBits, d.manBits, d.ieee}; }

double decodeNarrow(const Narrow& f, uint64_t code) {
  const bool neg = (code & f.signBit()) != 0;
  const uint64_t exp = (code >> f.m) & f.expMax();
  const uint64_t man = code & f.manMax();
  if (f.ieee && exp == f.expMax()) {
    if (man) return std::numeric_limits<double>::quiet_NaN();
    return neg ? -HUGE_VAL : HUGE_VAL;
  }
  if (!f.ieee && exp == f.expMax() && man == f.manMax()) return std::numeric_limits<double>::quiet_NaN();
  const double mag =
      exp == 0 ? std::ldexp(static_cast<double>(man), 1 - f.bias() - f.m)
               : std::ldexp(static_cast<double>(man | (uint64_t{1} << f.m)), static_cast<int>(exp) - f.bias() - f.m);
  return neg ? -mag : mag;
}

uint64_t encodeNarrow(const Narrow& f, double v) {
  const uint64_t sign = std::signbit(v) ? f.signBit() : 0;
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | f.nanCode();
  if (std::isinf(v)) return sign | f.overflowCode();
  if (a == 0) return sign;
  const int minExp = 1 - f.bias();
  int frexpExp = 0;
  std::frexp(a, &frexpExp);
  int e = std::max(frexpExp - 1, minExp);
  // a / quantum is exact (division by a power of two), so nearbyint is the only rounding.
  double q = std::nearbyint(std::ldexp(a, f.m - e));
  if (q >= std::ldexp(1.0, f.m + 1)) {
    q /= 2;
    ++e;
  }
  const uint64_t iq = static_cast<uint64_t>(q);
  uint64_t code =
      iq < (uint64_t{1} << f.m) ? iq : (static_cast<uint64_t>(e + f.bias()) << f.m) | (iq - (uint64_t{1} << f.m));
  if (code > f.maxFinite()) code = f.overflowCode();
  return sign | code;
}

}  // namespace

const DtypeInfo& dtypeInfo(cclDataType_t t) {
  // The table is in enum order, so the type indexes it.
  const std::vector<DtypeInfo>& all = table();
  const int i = static_cast<int>(t);
  if (i < 0 || i >= static_cast<int>(all.size()))
    throw std::invalid_argument(std::string("unknown data type ") + std::to_string(i));
  return all[i];
}

const std::vector<cclDataType_t>& allDtypes() {
  static const std::vector<cclDataType_t> all = [] {
    std::vector<cclDataType_t> v;
    for (const DtypeInfo& d : table()) v.push_back(d.type);
    return v;
  }();
  return all;
}

const char* opName(cclRedOp_t op) {
  switch (op) {
    case cclSum:
      return "sum";
    case cclProd:
      return "prod";
    case cclMax:
      return "max";
    case cclMin:
      return "min";
    case cclAvg:
      return "avg";
    default:
      return "invalid";
  }
}

const std::vector<cclRedOp_t>& allOps() {
  static const std::vector<cclRedOp_t> ops = {cclSum, cclProd, cclMax, cclMin, cclAvg};
  return ops;
}

namespace {
template <typename T>
uint64_t loadAs(const void* buf, size_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + index * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void storeAs(void* buf, size_t index, uint64_t bits) {
  const T v = static_cast<T>(bits);
  std::memcpy(static_cast<char*>(buf) + index * sizeof(T), &v, sizeof(T));
}
}  // namespace

uint64_t loadBits(const void* buf, size_t index, size_t size) {
  switch (size) {
    case 1:
      return loadAs<uint8_t>(buf, index);
    case 2:
      return loadAs<uint16_t>(buf, index);
    case 4:
      return loadAs<uint32_t>(buf, index);
    default:
      return loadAs<uint64_t>(buf, index);
  }
}

void storeBits(void* buf, size_t index, size_t size, uint64_t bits) {
  switch (size) {
    case 1:
      return storeAs<uint8_t>(buf, index, bits);
    case 2:
      return storeAs<uint16_t>(buf, index, bits);
    case 4:
      return storeAs<uint32_t>(buf, index, bits);
    default:
      return storeAs<uint64_t>(buf, index, bits);
  }
}

double decodeFloat(cclDataType_t t, uint64_t bits) {
  if (t == cclFloat32) {
    float f;
    const uint32_t u = static_cast<uint32_t>(bits);
    std::memcpy(&f, &u, sizeof(f));
    return f;
  }
  if (t == cclFloat64) {
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  }
  return decodeNarrow(narrowOf(dtypeInfo(t)), bits);
}

uint64_t encodeFloat(cclDataType_t t, double value) {
  if (t == cclFloat32) {
    const float f = static_cast<float>(value);
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
  }
  if (t == cclFloat64) {
    uint64_t u;
    std::memcpy(&u, &value, sizeof(u));
    return u;
  }
  return encodeNarrow(narrowOf(dtypeInfo(t)), value);
}

bool isFiniteCode(cclDataType_t t, uint64_t bits) { return std::isfinite(decodeFloat(t, bits)); }

int64_t orderedCode(cclDataType_t t, uint64_t bits) {
  const size_t size = dtypeInfo(t).size;
  const uint64_t signBit = uint64_t{1} << (8 * size - 1);
  const int64_t magnitude = static_cast<int64_t>(bits & (signBit - 1));
  return (bits & signBit) ? -magnitude : magnitude;
}

std::string describeBits(cclDataType_t t, uint64_t bits) {
  const DtypeInfo& d = dtypeInfo(t);
  char buf[96];
  if (d.kind == Kind::kFloat)
    std::snprintf(buf, sizeof(buf), "0x%llx (=%.9g)", static_cast<unsigned long long>(bits), decodeFloat(t, bits));
  else if (d.kind == Kind::kSigned)
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(signExtend(bits, d.size)));
  else
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(bits));
  return buf;
}

}  // namespace ccltest
