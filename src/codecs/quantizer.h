// SPDX-License-Identifier: BSD-3-Clause
// Block quantizers (fp8, mxfp8, int8/4/2) on the CPU. Called through codec.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/codec.h"

namespace ccl::codec::detail {

size_t quantizerMaxBytes(const Params& p, size_t n);
size_t quantizerEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual);
// `h` comes from readHeader and `in` holds the whole stream.
void quantizerDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type);
void quantizerAccumulate(const Header& h, const uint8_t* in, float* acc);

}  // namespace ccl::codec::detail
