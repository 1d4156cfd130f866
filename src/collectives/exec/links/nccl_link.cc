// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/links/nccl_link.h"

namespace ccl::coll {

void NcclLink::group(std::span<const Transfer> transfers, Stream& stream) {
  ops_.clear();
  for (const Transfer& x : transfers) ops_.push_back({x.send, x.peer, x.buf, x.bytes});
  t_.group(ops_, stream.native());
}

}  // namespace ccl::coll
