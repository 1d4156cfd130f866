// SPDX-License-Identifier: BSD-3-Clause
#include "transport/transport.h"

#include <string>

#include "common/error.h"

namespace ccl::transport {

void checkPost(const Transport& t, int peer, uint64_t tag, const void* buf, size_t bytes) {
  CCL_CHECK(peer >= 0 && peer < t.size(), cclInvalidArgument,
            "peer " + std::to_string(peer) + " out of range for " + std::to_string(t.size()) + " ranks");
  CCL_CHECK(tag <= kTagMask, cclInvalidArgument,
            "tag " + std::to_string(tag) + " exceeds " + std::to_string(kTagBits) + " bits");
  CCL_CHECK(buf || bytes == 0, cclInvalidArgument, "null buffer for a non-empty message");
}

void checkPostInPlace(const Transport& t, int peer, uint64_t tag, const Sink* sink) {
  checkPost(t, peer, tag, sink, 0);
  CCL_CHECK(sink, cclInvalidArgument, "a receive in place without a sink");
}

}  // namespace ccl::transport
