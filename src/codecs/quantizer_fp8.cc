// SPDX-License-Identifier: BSD-3-Clause
// The fp8 quantizers (e4m3, e5m2) and mxfp8. Their loops are quantizer_loops.h's; this file compiles them.
#include "codecs/quantizer_loops.h"

namespace ccl::codec::detail::quantizer {
CCL_QUANTIZER_INSTANTIATE(, Fp8Kind<fp::E4M3>)
CCL_QUANTIZER_INSTANTIATE(, Fp8Kind<fp::E5M2>)
CCL_QUANTIZER_INSTANTIATE(, MxKind<8>)
}  // namespace ccl::codec::detail::quantizer
