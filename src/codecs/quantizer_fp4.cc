// SPDX-License-Identifier: BSD-3-Clause
// The 4-bit float quantizers: mxfp4 and nvfp4. Their loops are quantizer_loops.h's; this file compiles them.
#include "codecs/quantizer_loops.h"

namespace ccl::codec::detail::quantizer {
CCL_QUANTIZER_INSTANTIATE(, MxKind<4>)
CCL_QUANTIZER_INSTANTIATE(, Nvfp4Kind)
}  // namespace ccl::codec::detail::quantizer
