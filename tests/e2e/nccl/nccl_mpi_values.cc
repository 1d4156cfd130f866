// SPDX-License-Identifier: BSD-3-Clause
#include "nccl_mpi_values.h"

#include <ccl/ccl.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace nccl_mpi {
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

double roundTo(ncclDataType_t t, double v) {
  if (t == ncclFloat32) return static_cast<float>(v);
  if (t == ncclFloat64 || !isFloat(t)) return v;  // integer inputs are always in range
  unsigned char tmp[8];
  set(t, tmp, 0, v);
  return get(t, tmp, 0);
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
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  if (cclCodecFromName(codec.c_str(), &c.codec) != cclSuccess) return false;
  // Only codecs with a scale have an absolute term: a sparsifier's bound of an element of 0
  // is 0 (nothing to drop), a quantizer's is not.
  double absTerm = 0;
  if (cclCodecErrorBound(&c, 0, 1, 1, &absTerm) != cclSuccess) return false;
  if (c.codec != cclCodecNone && absTerm == 0) return false;
  return cclCodecErrorBound(&c, m, m, 1, bound) == cclSuccess;
}

bool compressedKind(const char* kind) {
  const char* env = std::getenv("CCL_COMPRESS");
  unsigned mask = 0;
  cclOpKind_t k;
  if (cclCompressListParse(env ? env : "allreduce,reducescatter", &mask) != cclSuccess ||
      cclOpKindFromName(kind, &k) != cclSuccess)
    return true;  // unknown: allow the codec's bound rather than fail on the test's own reading
  return (mask >> k) & 1u;
}

}  // namespace nccl_mpi
