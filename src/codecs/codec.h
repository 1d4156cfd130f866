// SPDX-License-Identifier: BSD-3-Clause
// The codec interface used by the collectives: encode n elements of fp32/bf16/fp16 into a
// self-describing stream (see wire.h), decode it back, or add it into an fp32 buffer.
// Everything is deterministic: the same input, parameters and seed give the same bytes.
//
// Every codec's error bound is documented once, in codec_table.h; errorBound() applies it.
// Codec none is bit-exact (fp32 stream; bf16/fp16 inputs widen exactly). Sparsifiers send
// the kept elements exactly (or fp16-rounded) and drop the rest. A quantizer block holding
// NaN/Inf, or whose scale falls outside the scale format (absmax below about 1e-38 for fp32
// scales, outside [6.1e-5, 65504]*qmax for fp16 scales), travels raw: y == x exactly
// (bf16/fp16 outputs round once). Fixed-length quantizer streams (Params::fixedLength, for
// links that post every stream at its bound) have no raw section instead: a block holding
// NaN/Inf decodes as NaN in every element, and a finite block whose fp32 scale would fall
// below 2^-126 is quantized with 2^-126 (its error bound gains that absolute unit).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"
#include "codecs/codec_table.h"
#include "codecs/wire.h"

namespace ccl::codec {

// Resolved, validated parameters of one codec (defaults filled in).
struct Params {
  cclCodec_t codec = cclCodecNone;
  uint32_t blockSize = 0;        // quantizers
  bool fp16Scales = false;       // int codecs
  bool fp16Values = false;       // sparsifiers
  double keepRatio = 0.01;       // topk, randk
  float threshold = 0.0f;        // threshold
  bool stochastic = false;       // quantizers
  bool fixedLength = false;      // quantizers with fp32 or e8m0 scales: see fixLength
  uint64_t seed = 0;             // stochastic rounding, randk, low-rank's first Q
  uint32_t rank = 0;             // low-rank
  size_t rows = 0, cols = 0;     // low-rank: the matrix shape (both 0: near-square, see lowRankShape)
  bool warmStart = true;         // low-rank: Q starts from the feedback state's last Q (cclCompression_t.warmStart)
  bool residualFeedback = true;  // low-rank: the feedback state adds and keeps the residual (false: Q only)
};

// The wire flags (wire.h) of a quantizer's streams with these parameters.
constexpr uint8_t quantizerFlags(const Params& p) {
  return static_cast<uint8_t>((p.fp16Scales ? kFlagFp16Scales : 0) | (p.stochastic ? kFlagStochastic : 0) |
                              (p.fixedLength ? kFlagFixedLength : 0));
}

// The parameters a link that posts every stream at its bound (it sees no lengths) encodes
// with: p with fixedLength set where the codec can write fixed-length streams (a quantizer
// with fp32 or e8m0 scales), so the bound is the quantized size rather than the size with
// every block raw; p unchanged otherwise.
Params fixLength(Params p);

// The matrix a low-rank codec sees in n elements: the given shape (rows * cols must be n),
// or cols = ceil(sqrt(n)), rows = ceil(n / cols), zero-padded; and the rank it uses,
// min(rank, rows, cols). Throws Error(cclInvalidArgument) for a shape that does not fit n.
struct LowRankShape {
  size_t rows = 0, cols = 0;
  uint32_t rank = 0;
};
LowRankShape lowRankShape(const Params& p, size_t n);

// fp32 values of the error-feedback state that encode() reads and updates for n elements:
// n residuals; a low-rank codec adds its warm-start Q (cols x rank) and a flag saying Q is set.
size_t residualFloats(const Params& p, size_t n);

// Defaults for `codec`: its table block size, fp32 scales and values, keep ratio 0.01.
Params defaultParams(cclCodec_t codec);

// Reads the first c->size bytes of a caller's struct (NULL: codec none) and validates them.
// Throws Error(cclInvalidArgument) naming the bad field.
Params resolveParams(const cclCompression_t* c);

// The codec named `name` (any case, as cclCodecName prints it) into *codec; false, and
// *codec untouched, if there is none (or either pointer is NULL). The exported
// cclCodecFromName (api/names.cc) adds the message cclGetLastError reports.
bool codecFromName(const char* name, cclCodec_t* codec);

// Elements kept by topk/randk for n inputs: round(keepRatio * n), at least 1 when n > 0.
uint64_t keptCount(const Params& p, uint64_t n);

// Upper bound of encode()'s output for n elements, for pre-sizing buffers.
size_t maxEncodedBytes(const Params& p, size_t n);

// Encodes n elements of `type` (cclFloat32, cclBfloat16 or cclFloat16) into out (outBytes
// long, at least maxEncodedBytes). Returns the bytes written. With `residual`
// (residualFloats(p, n) fp32, error feedback) the codec encodes v = x + residual and leaves
// residual = v - decode(out) (a low-rank codec also keeps its Q there for the next call).
// Throws Error(cclInvalidArgument) for a bad type, size or null buffer.
size_t encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes,
              float* residual = nullptr);

// What a receiver expects; a stream that disagrees is refused with cclInvalidUsage.
struct Expect {
  size_t count = 0;
  cclCodec_t codec = cclNumCodecs;  // cclNumCodecs: any codec
};

// Validates the stream in[0, inBytes) completely, then writes its count elements to y as
// `type` (fp32, bf16 or fp16). Nothing outside in[0, inBytes) or y[0, count) is touched.
// Throws Error(cclInvalidUsage) if the stream is malformed or does not match `expect`;
// y is written only when the stream is valid.
void decode(const void* in, size_t inBytes, const Expect& expect, void* y, cclDataType_t type);

// As decode, but acc[i] += decoded element i (fp32). acc is untouched if the stream is invalid.
void decodeAccumulate(const void* in, size_t inBytes, const Expect& expect, float* acc);

// One hop of a compressed reduction, fused: the stream in[0, inBytes) (validated as decode
// does) decoded and added to n elements of `type` at `local`, divided by `divisor` unless it
// is 1, and encoded with `p` into out as encode does (residual likewise). The bytes written
// are those of decodeAccumulate into the widened local values, the division in fp32, then
// encode, by construction (the CPU runs exactly those over one fp32 temporary per thread;
// the CUDA kernels share their element math). Returns encode's length; out and residual are
// untouched when the stream is refused (cclInvalidUsage). local is only read.
size_t decodeAddEncode(const Params& p, const void* in, size_t inBytes, const Expect& expect, const void* local,
                       cclDataType_t type, size_t n, float divisor, void* out, size_t outBytes,
                       float* residual = nullptr);

// Random-k's stages, for an allreduce that sums its streams' values over the ranks and not
// their headers (wire.h, nonFiniteNews): kRandKNewsOut writes one fp32 at dst, 0, or NaN
// when the stream at src has kFlagNonFinite; kRandKNewsIn sets that flag in the stream at dst
// when the fp32 at src (the news summed over the ranks) is not 0.
enum RandKStage : int { kRandKNewsOut = 0, kRandKNewsIn = 1 };

// A stage of the reduction of a codec that reduces in stages around sums of fp32 factors over
// the ranks (the low-rank codec: PowerSGD's allreduce, lowrank.h): stage 0, a sum, stage 1, a
// sum, stage 2. Stage 0 reads n elements of `type` at src and writes the codec's fp32 work
// area at dst; stage 1 updates the work area at dst (src unused); stage 2 reads the work
// area at src and writes n elements of `type` at dst, divided by `divisor`. `state` is the
// error-feedback state (residualFloats(p, n)) or null. Random-k has two stages around a sum
// of its streams' values (RandKStage; type, n, divisor and state unused). Throws
// Error(cclInternalError) for a codec without stages or a stage it does not have.
void runStage(const Params& p, int stage, const void* src, void* dst, cclDataType_t type, size_t n, float divisor,
              float* state);

// Header of a valid stream, for inspection (codec, count); throws like decode.
Header inspect(const void* in, size_t inBytes);

// Bytes of the stream at `in` (at most inBytes), from its header alone: what a link that
// did not see the encode's length must send. Throws like decode when the header is invalid.
size_t streamBytes(const void* in, size_t inBytes);

// The unit of a quantizer's abs error term for a block whose absmax is absMax: its scale
// (an fp16 scale's round-up included) or its e8m0 power of two. 0 for other codecs.
double scaleUnit(const Params& p, double absMax);

// Largest |y - x| the codec allows for one element after `quantizations` successive round
// trips (cclCodecErrorBound in ccl.h documents the arguments). Blocks that travel raw are
// exact and within any bound. A low-rank codec has no such bound: +inf.
double errorBound(const Params& p, double absValue, double absMax, int quantizations);

}  // namespace ccl::codec
