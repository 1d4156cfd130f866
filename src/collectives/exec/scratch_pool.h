// SPDX-License-Identifier: BSD-3-Clause
// Scratch memory of a communicator, kept between calls: allocating and faulting in tens of
// megabytes per call would cost as much as moving them over shared memory.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace ccl::coll {

class ScratchPool {
 public:
  // A buffer of at least `bytes`, 64-byte aligned, owned by the pool until release().
  void* acquire(size_t bytes);
  void release(void* p);

 private:
  // Blocks are allocated 64-byte aligned and must be freed the same way.
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  struct Block {
    std::unique_ptr<std::byte[], AlignedDelete> mem;
    size_t bytes;
    bool inUse;
  };
  std::vector<Block> blocks_;
};

// Releases a pool buffer when it goes out of scope.
class ScratchLease {
 public:
  ScratchLease(ScratchPool& pool, size_t bytes) : pool_(pool), ptr_(bytes ? pool.acquire(bytes) : nullptr) {}
  ~ScratchLease() {
    if (ptr_) pool_.release(ptr_);
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  void* get() const { return ptr_; }

 private:
  ScratchPool& pool_;
  void* ptr_;
};

}  // namespace ccl::coll
