// SPDX-License-Identifier: BSD-3-Clause
// The training text as byte tokens. A UTF-8 text file is turned once into a token file
// (<text>.tokens: magic, version, counts, then one byte per token) with a fixed split: the
// first 90 % trains, the last 10 % validates. Batches are drawn from (seed, step, index)
// alone, so every rank reads exactly the sequences it needs and any run can be resumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct Corpus {
  std::vector<uint8_t> train;
  std::vector<uint8_t> val;
};

// Loads the token file of `textPath`, making it first when it is missing or older than the
// text. Throws std::runtime_error with a clear message for a missing, unreadable or empty
// file, or when a split holds fewer than minTokens tokens.
Corpus loadCorpus(const std::string& textPath, size_t minTokens);

// Sequences of Tn tokens and their next-token targets.
struct Batch {
  std::vector<int> tokens;
  std::vector<int> targets;
};

// Global training sequence `index` of step `step`: a window of the train split starting at
// a position drawn from (seed, step, index). Appends it to `out`.
void appendTrainSequence(const Corpus& c, uint64_t seed, uint64_t step, uint64_t index, int Tn, Batch& out);

// Validation sequence `index` of `count`: windows spread evenly over the validation split.
void appendValSequence(const Corpus& c, uint64_t index, uint64_t count, int Tn, Batch& out);

// Entropy in nats of the byte frequencies of `tokens`: the loss of the best model that
// ignores context, the yardstick of the demo.
double unigramEntropy(const std::vector<uint8_t>& tokens);

}  // namespace gpt
