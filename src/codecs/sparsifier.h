// SPDX-License-Identifier: BSD-3-Clause
// Sparsifiers (topk, randk, threshold) on the CPU. Called through codec.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/codec.h"

namespace ccl::codec::detail {

size_t sparsifierMaxBytes(const Params& p, size_t n);
size_t sparsifierEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual);
// `h` comes from readHeader and `in` holds the whole stream.
void sparsifierDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type);
void sparsifierAccumulate(const Header& h, const uint8_t* in, float* acc);

}  // namespace ccl::codec::detail
