#include "nccl_mpi_values.h"

#include <cmath>
#include <cstring>

namespace nccl_mpi {
namespace {

// A binary float with `eb` exponent and `mb` mantissa bits (fp16: 5/10, bf16: 8/7), rounded
// to nearest even; written from the format's definition so the test does not borrow ccl's.
uint32_t encodeSmall(double v, int eb, int mb) {
  const int bias = (1 << (eb - 1)) - 1;
  const uint32_t sign = std::signbit(v) ? 1u << (eb + mb) : 0u;
  const uint32_t inf = ((1u << eb) - 1) << mb;
  if (std::isnan(v)) return inf | (1u << (mb - 1));
  const double a = std::fabs(v);
  const int minExp = 1 - bias;
  if (a < std::ldexp(1.0, minExp)) return sign | static_cast<uint32_t>(std::nearbyint(std::ldexp(a, mb - minExp)));
  if (std::isinf(a)) return sign | inf;
  int e = 0;
  std::frexp(a, &e);
  const int exp = e - 1;
  const double mant = std::nearbyint((std::ldexp(a, -exp) - 1.0) * std::ldexp(1.0, mb));
  const double bits = std::ldexp(static_cast<double>(exp + bias), mb) + mant;  // a carry moves into the exponent
  return sign | (bits >= inf ? inf : static_cast<uint32_t>(bits));
}

double decodeSmall(uint32_t bits, int eb, int mb) {
  const int bias = (1 << (eb - 1)) - 1;
  const double sign = (bits >> (eb + mb)) & 1 ? -1.0 : 1.0;
  const uint32_t exp = (bits >> mb) & ((1u << eb) - 1);
  const uint32_t mant = bits & ((1u << mb) - 1);
  if (exp == (1u << eb) - 1) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), 1 - bias - mb);
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -mb), static_cast<int>(exp) - bias);
}

template <class T>
T read(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void write(void* buf, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

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

const char* typeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "float16";
    case ncclFloat32:
      return "float32";
    case ncclFloat64:
      return "float64";
    case ncclBfloat16:
      return "bfloat16";
    default:
      return "fp8";
  }
}

bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

double unitRoundoff(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return std::ldexp(1.0, -11);
    case ncclBfloat16:
      return std::ldexp(1.0, -8);
    case ncclFloat32:
      return std::ldexp(1.0, -24);
    case ncclFloat64:
      return std::ldexp(1.0, -53);
    default:
      return 0;
  }
}

double load(ncclDataType_t t, const void* buf, size_t i) {
  switch (t) {
    case ncclInt8:
      return read<int8_t>(buf, i);
    case ncclUint8:
      return read<uint8_t>(buf, i);
    case ncclInt32:
      return read<int32_t>(buf, i);
    case ncclUint32:
      return read<uint32_t>(buf, i);
    case ncclInt64:
      return static_cast<double>(read<int64_t>(buf, i));
    case ncclUint64:
      return static_cast<double>(read<uint64_t>(buf, i));
    case ncclFloat16:
      return decodeSmall(read<uint16_t>(buf, i), 5, 10);
    case ncclBfloat16:
      return decodeSmall(read<uint16_t>(buf, i), 8, 7);
    case ncclFloat32:
      return read<float>(buf, i);
    case ncclFloat64:
      return read<double>(buf, i);
    default:
      return std::nan("");
  }
}

void store(ncclDataType_t t, void* buf, size_t i, double v) {
  switch (t) {
    case ncclInt8:
      return write(buf, i, static_cast<int8_t>(v));
    case ncclUint8:
      return write(buf, i, static_cast<uint8_t>(v));
    case ncclInt32:
      return write(buf, i, static_cast<int32_t>(v));
    case ncclUint32:
      return write(buf, i, static_cast<uint32_t>(v));
    case ncclInt64:
      return write(buf, i, static_cast<int64_t>(v));
    case ncclUint64:
      return write(buf, i, static_cast<uint64_t>(v));
    case ncclFloat16:
      return write(buf, i, static_cast<uint16_t>(encodeSmall(v, 5, 10)));
    case ncclBfloat16:
      return write(buf, i, static_cast<uint16_t>(encodeSmall(v, 8, 7)));
    case ncclFloat32:
      return write(buf, i, static_cast<float>(v));
    case ncclFloat64:
      return write(buf, i, v);
    default:
      return;
  }
}

double roundTo(ncclDataType_t t, double v) {
  if (t == ncclFloat32) return static_cast<float>(v);
  if (t == ncclFloat64 || !isFloat(t)) return v;  // integer inputs are always in range
  unsigned char tmp[8];
  store(t, tmp, 0, v);
  return load(t, tmp, 0);
}

uint64_t mix(uint64_t salt, uint64_t rank, uint64_t i) {
  // splitmix64 finaliser over a combination that differs for every (salt, rank, i) in use.
  uint64_t z = salt * 0x9e3779b97f4a7c15ull + rank * 0xbf58476d1ce4e5b9ull + i * 0x94d049bb133111ebull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double exactInput(ncclRedOp_t op, int nranks, int rank, uint64_t h) {
  if (op == ncclProd) return rank < 3 && (h & 1) ? 2 : 1;
  if (op == ncclAvg) return static_cast<double>(nranks) * static_cast<double>(h % 4);
  return static_cast<double>(h % 5);
}

double moveInput(uint64_t h) { return static_cast<double>(h % 200); }

double randomInput(uint64_t h) { return std::ldexp(static_cast<double>(h >> 40), -23) - 1.0; }

bool quantBound(const std::string& codec, double m, double* bound) {
  // |x - y| per element; s is the block's scale (absmax / the format's largest value).
  if (codec == "none")
    *bound = 0;
  else if (codec == "int8")
    *bound = m / 127 / 2;
  else if (codec == "int4")
    *bound = m / 7 / 2;
  else if (codec == "int2")
    *bound = m / 2;
  else if (codec == "fp8_e4m3")
    *bound = m / 16 + m / 448 / 1024;
  else if (codec == "fp8_e5m2")
    *bound = m / 8 + m / 57344 / 131072;
  else if (codec == "mxfp8_e4m3")
    *bound = m / 7 + m / 256 / 1024;
  else
    return false;
  return true;
}

}  // namespace nccl_mpi
