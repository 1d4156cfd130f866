// SPDX-License-Identifier: BSD-3-Clause
// Checkpoints, independent of how the run was laid out over ranks. The file is, in order
// (little-endian):
//   header   magic "CCLGPTck", u32 version (2), u32 header bytes, i32 vocab, maxSeq, layers,
//            channels, heads, 4 bytes of padding (zero), then from byte 40: u64 step (the
//            next step to run), u64 optimiser updates, u64 data seed, u64 parameter count P,
//            then from byte 72: u64 local heads H, u64 values per head N, u64 the heads'
//            optimiser updates (96 bytes in all, the header-bytes field)
//   params   P fp32 values in parameterLayout order (params.h)
//   adam m   P fp32 values, the same order
//   adam v   P fp32 values, the same order
//   heads    H times: N fp32 parameters, N AdamW m, N AdamW v (local_head.h's order)
//   check    u64 FNV-1a of every byte before it
// Version 1 (written before the local heads were kept) ends its header at byte 72 and has no
// heads; it still loads. It is written to <path>.tmp and renamed, so a crash never leaves a
// half-written file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

namespace gpt {

struct Checkpoint {
  ModelConfig config;
  uint64_t step = 0;
  uint64_t optimizerSteps = 0;
  uint64_t seed = 0;
  std::vector<float> params, m, v;  // P values each
  // The local heads of --schedule local and local-overlap (one per stage but the last, in
  // the order of the stages whose loss they give), each's parameters, AdamW m and v: 3 x
  // localHeadSize values per head. Empty without local updates: they are the only state of
  // a run outside the model's and AdamW's, and resuming is bit-identical only with them.
  uint64_t localHeads = 0, localHeadSize = 0, localHeadSteps = 0;
  std::vector<float> heads;
};

void saveCheckpoint(const std::string& path, const Checkpoint& c);

// Throws std::runtime_error naming what is wrong: a missing file, another format or
// version, a truncated or corrupt file (checksum), inconsistent sizes.
Checkpoint loadCheckpoint(const std::string& path);

}  // namespace gpt
