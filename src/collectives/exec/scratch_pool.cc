// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/scratch_pool.h"

#include <algorithm>

namespace ccl::coll {

void* ScratchPool::acquire(size_t bytes) {
  Block* best = nullptr;
  for (Block& b : blocks_)
    if (!b.inUse && b.bytes >= bytes && (!best || b.bytes < best->bytes)) best = &b;
  if (!best) {
    // Grow the largest free block rather than keep many: the next call is likely as big.
    auto free = std::find_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return !b.inUse; });
    if (free != blocks_.end()) blocks_.erase(free);
    size_t rounded = (bytes + 4095) & ~size_t{4095};
    blocks_.push_back(
        {std::unique_ptr<std::byte[], AlignedDelete>(new (std::align_val_t{64}) std::byte[rounded]), rounded, false});
    best = &blocks_.back();
  }
  best->inUse = true;
  return best->mem.get();
}

void ScratchPool::release(void* p) {
  for (Block& b : blocks_)
    if (b.mem.get() == p) b.inUse = false;
}

}  // namespace ccl::coll
