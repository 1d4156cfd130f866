// SPDX-License-Identifier: BSD-3-Clause
// Text generation from a model: temperature and top-k sampling, one byte at a time.
#pragma once

#include <cstdint>
#include <string>

#include "model.h"

namespace gpt {

// Continues `prompt` by `count` bytes (the context is the last maxSeq bytes).
std::string generate(Model<float>& m, const std::string& prompt, int count, float temperature, int topK, uint64_t seed);

}  // namespace gpt
