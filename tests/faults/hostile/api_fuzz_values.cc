// SPDX-License-Identifier: BSD-3-Clause
// Element values in every type the fuzzer checks (IEEE half and bfloat16 by hand), and the
// guarded buffers that show a write outside a call's buffers.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "api_fuzz.h"

namespace apifuzz {

size_t typeSize(int t) {
  static const size_t sizes[cclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return t >= 0 && t < cclNumTypes ? sizes[t] : 0;
}

const char* typeName(int t) {
  static const char* names[cclNumTypes] = {"int8",    "uint8",   "int32",   "uint32",   "int64",   "uint64",
                                           "float16", "float32", "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return t >= 0 && t < cclNumTypes ? names[t] : "invalid";
}

namespace {

// IEEE half from a non-negative integer up to 2048 (exact).
uint16_t halfFrom(double v) {
  if (v == 0) return 0;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  const auto mant = static_cast<uint16_t>((m * 2 - 1) * 1024);
  return static_cast<uint16_t>(((e - 1 + 15) << 10) | mant);
}

double halfTo(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1 : 1;
  if (e == 0) return sign * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + m, e - 25);
}

template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

void put(void* p, int t, size_t i, double v) {
  switch (t) {
    case cclInt8:
      return store<int8_t>(p, i, static_cast<int8_t>(v));
    case cclUint8:
      return store<uint8_t>(p, i, static_cast<uint8_t>(v));
    case cclInt32:
      return store<int32_t>(p, i, static_cast<int32_t>(v));
    case cclUint32:
      return store<uint32_t>(p, i, static_cast<uint32_t>(v));
    case cclInt64:
      return store<int64_t>(p, i, static_cast<int64_t>(v));
    case cclUint64:
      return store<uint64_t>(p, i, static_cast<uint64_t>(v));
    case cclFloat16:
      return store<uint16_t>(p, i, halfFrom(v));
    case cclFloat32:
      return store<float>(p, i, static_cast<float>(v));
    case cclFloat64:
      return store<double>(p, i, v);
    case cclBfloat16: {
      const float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return store<uint16_t>(p, i, static_cast<uint16_t>(bits >> 16));
    }
    default:  // fp8: some small positive values; never checked
      return store<uint8_t>(p, i, static_cast<uint8_t>(0x20 + static_cast<int>(v)));
  }
}

double get(const void* p, int t, size_t i) {
  switch (t) {
    case cclInt8:
      return load<int8_t>(p, i);
    case cclUint8:
      return load<uint8_t>(p, i);
    case cclInt32:
      return load<int32_t>(p, i);
    case cclUint32:
      return load<uint32_t>(p, i);
    case cclInt64:
      return static_cast<double>(load<int64_t>(p, i));
    case cclUint64:
      return static_cast<double>(load<uint64_t>(p, i));
    case cclFloat16:
      return halfTo(load<uint16_t>(p, i));
    case cclFloat32:
      return load<float>(p, i);
    case cclFloat64:
      return load<double>(p, i);
    case cclBfloat16: {
      const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(p, i)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default:
      return NAN;
  }
}

Guarded::Guarded(size_t bytes, size_t shift) : bytes_(bytes), shift_(shift), mem_(2 * kGuard + shift + bytes) {
  for (size_t j = 0; j < mem_.size(); ++j) mem_[j] = pattern(j);
}

std::optional<long> Guarded::hit() const {
  const size_t begin = kGuard + shift_, end = begin + bytes_;
  for (size_t j = 0; j < begin; ++j)
    if (mem_[j] != pattern(j)) return static_cast<long>(j) - static_cast<long>(begin);
  for (size_t j = end; j < mem_.size(); ++j)
    if (mem_[j] != pattern(j)) return static_cast<long>(j - begin);
  return std::nullopt;
}

}  // namespace apifuzz
