// SPDX-License-Identifier: BSD-3-Clause
// The low-rank codec (powersgd) on the CPU: one power iteration of PowerSGD (Vogels et al.
// 2019) over the buffer seen as a rows x cols matrix M: P = M Q, P's columns orthonormalised,
// Q = M^T P, and M ~ P Q^T. The stream carries P and Q (wire.h). The matrix steps are exported
// for the PowerSGD allreduce, which sums P and Q over the ranks between them.
//
// Error-feedback state (residualFloats values): the residual M - P Q^T of the n elements,
// then the warm-start Q (cols x r), then a flag (1: that Q is set). Without it every call
// starts from the Q that `seed` draws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/codec.h"

namespace ccl::codec::lowrank {

// Views of a low-rank feedback state of n elements.
struct State {
  float* residual;  // n
  float* q;         // cols x rank
  float* set;       // 1: q holds a warm start
};
State stateOf(float* feedback, size_t n, const LowRankShape& s);

// The first Q (cols x r, row-major) drawn from `seed`: uniform in [-0.5, 0.5).
void initialQ(uint64_t seed, size_t cols, uint32_t r, float* q);
// p (rows x r) = m (rows x cols) q (cols x r); sums in double, in a fixed order.
void project(const float* m, size_t rows, size_t cols, const float* q, uint32_t r, float* p);
// Orthonormalises p's r columns in order (Gram-Schmidt twice, in double); a column that is
// (numerically) in the span of the earlier ones becomes zero.
void orthonormalize(float* p, size_t rows, uint32_t r);
// q (cols x r) = m^T p.
void projectBack(const float* m, size_t rows, size_t cols, const float* p, uint32_t r, float* q);
// out[i] (= or +=) scale * (p q^T)[i] for the first n elements of the rows x cols product.
void expand(const float* p, const float* q, size_t cols, uint32_t r, size_t n, float scale, bool accumulate,
            float* out);

// The PowerSGD allreduce's three local steps (codec::runStage's stages 0, 1, 2), around the
// sums of P and Q (collectives/algorithms/lowrank.cc plans them). They work in an fp32 area of workFloats(s):
// M (rows x cols, the n elements padded with zeros), then Q (cols x r), then P (rows x r).
struct Work {
  float* m;
  float* q;
  float* p;
};
size_t workFloats(const LowRankShape& s);
Work workOf(float* area, const LowRankShape& s);
// M = x (+ the residual); Q = the warm start, or drawn from p.seed; P = M Q.
void allReduceStart(const Params& p, const void* x, cclDataType_t type, size_t n, float* feedback, float* area);
// With P summed: P orthonormalised; Q = M^T P; the residual = M - P Q^T (this rank's loss).
void allReduceMiddle(const Params& p, size_t n, float* feedback, float* area);
// With Q summed: y = P Q^T / divisor, stored as `type`; Q kept as the next warm start.
void allReduceFinish(const Params& p, size_t n, float divisor, float* feedback, const float* area, void* y,
                     cclDataType_t type);

}  // namespace ccl::codec::lowrank

namespace ccl::codec::detail {

size_t lowRankMaxBytes(const Params& p, size_t n);
size_t lowRankEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual);
// `h` comes from readHeader and `in` holds the whole stream.
void lowRankDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type);
void lowRankAccumulate(const Header& h, const uint8_t* in, float* acc);

}  // namespace ccl::codec::detail
