// SPDX-License-Identifier: BSD-3-Clause
// The model's shape: a GPT-2 as llm.c defines it, over a byte vocabulary.
#pragma once

#include <cstddef>
#include <string>

namespace gpt {

struct ModelConfig {
  int vocab = 256;   // byte-level tokens
  int maxSeq = 256;  // longest sequence; the learned position embedding has this many rows
  int layers = 6;
  int channels = 256;  // d_model
  int heads = 8;

  int headSize() const { return channels / heads; }
};

// Why `c` cannot be built (empty when it can): the messages a user sees for impossible configs.
std::string configProblem(const ModelConfig& c);

}  // namespace gpt
