// SPDX-License-Identifier: BSD-3-Clause
// The integer quantizers: int8, int4, int2 and int2 midrise. Their loops are quantizer_loops.h's; this file compiles
// them.
#include "codecs/quantizer_loops.h"

namespace ccl::codec::detail::quantizer {
CCL_QUANTIZER_INSTANTIATE(, IntKind<8>)
CCL_QUANTIZER_INSTANTIATE(, IntKind<4>)
CCL_QUANTIZER_INSTANTIATE(, IntKind<2>)
CCL_QUANTIZER_INSTANTIATE(, MidriseKind)
}  // namespace ccl::codec::detail::quantizer
