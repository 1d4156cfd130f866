// SPDX-License-Identifier: BSD-3-Clause
// What a communication site carries: one of ccl's codecs (none: uncompressed) with its
// error feedback, and the part of the site's traffic it applies to (blocks, sending stages,
// pipeline phases) after an uncompressed warm-up. Given on the command line as
//   --compress SITE=CODEC[:key=value]...
// with the keys of parseSiteCodec; every rank of a group decides the same way, so sender and
// receiver (or every rank of a collective) always agree on the codec.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ccl/ccl.h"
#include "sites.h"

namespace gpt {

struct SiteCodec {
  cclCompression_t compression = CCL_COMPRESSION_INITIALIZER;
  cclFeedbackKind_t feedback = cclFeedbackNone;
  float locoBeta = 0.5f;                   // LoCo: weight of the previous error
  int locoReset = 0;                       // LoCo: clear the error every this many calls (0: never)
  int firstLayer = 0, endLayer = 1 << 30;  // Scope::kLayers: the blocks [first, end) it applies to
  uint64_t stages = ~0ull;                 // Scope::kStages: bit s set applies it to what stage s sends
  unsigned phases = ~0u;                   // pipeline sites: bit p set applies it to phase p's transfers
  int warmupSteps = 0;                     // steps [0, warmupSteps) go uncompressed
  bool channelScales = false;              // quantizers: one scale per channel (column), over the tokens
  bool warmStartOnly = false;              // powersgd: a feedback state keeps the warm start, no error

  bool active() const { return compression.codec != cclCodecNone; }
};

// Where a call is made: its step, and its block, sending stage and pipeline phase where
// they apply (-1: none).
struct CallPlace {
  int step = 0;
  int layer = -1;
  int stage = -1;
  int phase = -1;
};

// Whether `c` compresses a call made at `at`.
bool applies(const SiteCodec& c, const CallPlace& at);

// Parses "SITE=CODEC[:key=value]...". CODEC is a ccl codec name (ccl-info lists them) or
// none. Keys: block=N (quantiser block), bits=N, scale-bits=16|32, keep=F (topk, randk),
// threshold=F, stochastic or stochastic=0|1 (quantisers round stochastically), seed=N, rank=N (powersgd; the
// matrix is the call's: tokens x channels, or the weight's shape), scale=channel (quantisers,
// allreduce of a tokens x channels matrix: one scale per channel over the call's tokens, as
// Bian et al.; the call travels transposed, in blocks of its row count, which must be a
// multiple of 8 up to 65536), warmstart=on|off (powersgd: on keeps the warm start even
// without error feedback; off starts every call from the seed), feedback=none|ef|loco,
// beta=F and reset=N (LoCo), layers=A-B (blocks, inclusive; tp sites), stages=S (a set of
// sending stages, ranges joined by '+', e.g. 0+2-3; pp and dp sites, stages below 64),
// phases=warmup+steady+cooldown (pp sites), warmup=K (steps). A range may be one number or
// open-ended ("2-"). Throws std::invalid_argument naming the problem.
std::pair<Site, SiteCodec> parseSiteCodec(const std::string& spec);

// The spec that parseSiteCodec would read back (for logs and reports).
std::string describe(Site s, const SiteCodec& c);

}  // namespace gpt
