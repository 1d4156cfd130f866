// SPDX-License-Identifier: BSD-3-Clause
#include "transport/shm/ring.h"

#include <cstddef>
#include <cstring>
#include <new>

namespace ccl::transport::shm {
namespace {

// The header's flag word at stream offset `at` (records start 32-byte aligned, so a header
// never wraps).
std::atomic_ref<uint64_t> seqAt(char* data, size_t capacity, uint64_t at) {
  auto* h = reinterpret_cast<FragmentHeader*>(data + (at & (capacity - 1)));
  return std::atomic_ref<uint64_t>(h->seq);
}

// `bytes` at stream offset `at`, in two parts where they wrap around the ring's end.
void copyIn(char* data, size_t capacity, uint64_t at, const void* src, size_t bytes) {
  const size_t off = at & (capacity - 1);
  const size_t first = bytes < capacity - off ? bytes : capacity - off;
  std::memcpy(data + off, src, first);
  if (first < bytes) std::memcpy(data, static_cast<const char*>(src) + first, bytes - first);
}

void copyOut(void* dst, const char* data, size_t capacity, uint64_t at, size_t bytes) {
  const size_t off = at & (capacity - 1);
  const size_t first = bytes < capacity - off ? bytes : capacity - off;
  std::memcpy(dst, data + off, first);
  if (first < bytes) std::memcpy(static_cast<char*>(dst) + first, data, bytes - first);
}

}  // namespace

void initRing(void* base, size_t capacity) {
  auto* c = new (base) RingControl;
  c->head.store(0, std::memory_order_relaxed);
  c->producer.store(kOpen, std::memory_order_relaxed);
  c->consumer.store(kOpen, std::memory_order_relaxed);
  std::memset(static_cast<char*>(base) + sizeof(RingControl), 0, capacity);  // no flag matches offset + 1
  std::atomic_thread_fence(std::memory_order_release);
}

RingWriter::RingWriter(void* base, size_t capacity)
    : control_(static_cast<RingControl*>(base)),
      data_(static_cast<char*>(base) + sizeof(RingControl)),
      capacity_(capacity),
      headCache_(control_->head.load(std::memory_order_acquire)) {
  tail_ = headCache_;  // a new writer starts where the consumer is (an empty ring)
}

bool RingWriter::tryPush(const FragmentHeader& h, const void* payload) {
  const size_t need = recordBytes(h.bytes);
  // Room for the record and the next record's header, whose flag is cleared below: the
  // consumer then finds either a flag it is waiting for or 0 where the next record starts,
  // never stale bytes of an earlier lap that happen to read as its offset.
  const size_t room = need + sizeof(FragmentHeader);
  if (tail_ + room - headCache_ > capacity_) {
    // Read the consumer's counter only when the cached one says there is no room: its
    // cache line moves between the cores once per refill, not once per record.
    headCache_ = control_->head.load(std::memory_order_acquire);
    if (tail_ + room - headCache_ > capacity_) return false;
  }
  if (h.bytes) copyIn(data_, capacity_, tail_ + sizeof(FragmentHeader), payload, h.bytes);
  std::memcpy(data_ + (tail_ & (capacity_ - 1)), &h, offsetof(FragmentHeader, seq));  // a header never wraps
  seqAt(data_, capacity_, tail_ + need).store(0, std::memory_order_relaxed);
  seqAt(data_, capacity_, tail_).store(tail_ + 1, std::memory_order_release);  // the record, then its flag
  tail_ += need;
  return true;
}

RingReader::RingReader(void* base, size_t capacity)
    : control_(static_cast<RingControl*>(base)),
      data_(static_cast<char*>(base) + sizeof(RingControl)),
      capacity_(capacity),
      head_(control_->head.load(std::memory_order_relaxed)) {}

bool RingReader::empty() { return seqAt(data_, capacity_, head_).load(std::memory_order_acquire) != head_ + 1; }

bool RingReader::peek(FragmentHeader* h) {
  if (seqAt(data_, capacity_, head_).load(std::memory_order_acquire) != head_ + 1) return false;
  std::memcpy(h, data_ + (head_ & (capacity_ - 1)), offsetof(FragmentHeader, seq));
  h->seq = head_ + 1;
  peeked_ = recordBytes(h->bytes);
  return true;
}

void RingReader::copyPayload(void* dst, size_t offset, size_t bytes) const {
  if (bytes) copyOut(dst, data_, capacity_, head_ + sizeof(FragmentHeader) + offset, bytes);
}

void RingReader::pop() {
  head_ += peeked_;
  peeked_ = 0;
  control_->head.store(head_, std::memory_order_release);  // the bytes read, then their release
}

}  // namespace ccl::transport::shm
