// SPDX-License-Identifier: BSD-3-Clause
// A single-producer single-consumer byte ring in memory two processes map (or two threads
// share): the shared-memory channel's one queue per ordered pair of ranks. The producer
// appends records (a 32-byte header and its payload, rounded up to 32 bytes), the consumer
// reads them in order; a record is all there or not there. A record's header carries its
// own flag (`seq`, the record's offset in the stream plus one, stored last with release
// order), so the consumer learns of a small message from the one cache line that holds it,
// with no counter of the producer's to read; the consumer's released count (`head`, on a
// line of its own) is read by the producer only when its cached copy says the ring is full.
// No lock, no system call. A payload may wrap around the end of the ring (copied in two
// parts); a header never does (records start 32-byte aligned).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ccl::transport::shm {

// One end's state as the other end sees it (RingControl::producer / consumer).
enum EndState : uint32_t { kOpen = 0, kAborted = 1, kMismatch = 2, kDeparted = 3 };

// What an end's word holds: its EndState in the low byte and, for an abort, the rank that
// started it plus one above. A rank that passes a peer's abort on marks its own ends with
// that peer's rank, so every rank names the one that aborted, not the first that passed it
// on (an abort spreads through every rank's ends). Any abort's word is greater than
// kDeparted's, which it overrides.
constexpr int kAbortedByShift = 8;
constexpr uint32_t endWord(EndState s, int by) {
  return s | (s == kAborted || s == kMismatch ? static_cast<uint32_t>(by + 1) << kAbortedByShift : 0u);
}
constexpr EndState stateOf(uint32_t word) { return static_cast<EndState>(word & ((1u << kAbortedByShift) - 1)); }
// The rank that started the abort a word reports, or -1 when it does not say.
constexpr int abortedByOf(uint32_t word) { return static_cast<int>(word >> kAbortedByShift) - 1; }

struct RingControl {
  alignas(64) std::atomic<uint64_t> head;      // bytes the consumer has released
  alignas(64) std::atomic<uint32_t> producer;  // end word (endWord) of the producing rank
  std::atomic<uint32_t> consumer;              // end word (endWord) of the consuming rank
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the ring's counters are shared between processes");

// A fragment of a message: `bytes` of the message's `total`, the message's `tag`. A message
// is one or more fragments back to back; its first fragment starts it.
struct FragmentHeader {
  uint64_t tag;
  uint64_t total;
  uint64_t bytes;
  uint64_t seq;  // written by the ring: the record's offset + 1 once it is complete
};
constexpr size_t kRecordAlign = sizeof(FragmentHeader);  // 32

constexpr size_t recordBytes(size_t payload) {
  return sizeof(FragmentHeader) + (payload + kRecordAlign - 1) / kRecordAlign * kRecordAlign;
}

// The memory a ring of `capacity` bytes of records takes (capacity a power of two, at
// least 128).
constexpr size_t ringFootprint(size_t capacity) { return sizeof(RingControl) + capacity; }

// Both ends of one ring: `base` is ringFootprint(capacity) bytes, 64-byte aligned,
// initialised once by initRing before either end is made.
void initRing(void* base, size_t capacity);

class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(void* base, size_t capacity);
  // Appends a fragment if its record fits now; false (nothing written) when it does not.
  bool tryPush(const FragmentHeader& h, const void* payload);
  // The largest payload a fragment may carry (a quarter of the ring).
  size_t maxFragment() const { return capacity_ / 4 - sizeof(FragmentHeader); }
  RingControl* control() const { return control_; }

 private:
  RingControl* control_ = nullptr;
  char* data_ = nullptr;
  size_t capacity_ = 0;
  uint64_t tail_ = 0;       // mine: bytes appended
  uint64_t headCache_ = 0;  // the consumer's, as last read
};

class RingReader {
 public:
  RingReader() = default;
  RingReader(void* base, size_t capacity);
  // The next record's header, if one is there.
  bool peek(FragmentHeader* h);
  // Copies `bytes` of the peeked record's payload from `offset` into dst.
  void copyPayload(void* dst, size_t offset, size_t bytes) const;
  // The peeked record's first `bytes` of payload where they lie, handed to f(data, n): in
  // one part, or in two where they wrap around the ring's end (the first part then a
  // multiple of kRecordAlign bytes, records starting so aligned).
  template <class F>
  void forPayload(size_t bytes, F&& f) const {
    const size_t off = (head_ + sizeof(FragmentHeader)) & (capacity_ - 1);
    const size_t first = bytes < capacity_ - off ? bytes : capacity_ - off;
    if (first) f(static_cast<const void*>(data_ + off), first);
    if (first < bytes) f(static_cast<const void*>(data_), bytes - first);
  }
  // Releases the peeked record to the producer.
  void pop();
  // True when no complete record is waiting.
  bool empty();
  RingControl* control() const { return control_; }

 private:
  RingControl* control_ = nullptr;
  char* data_ = nullptr;
  size_t capacity_ = 0;
  uint64_t head_ = 0;    // mine: bytes released
  uint64_t peeked_ = 0;  // the peeked record's size, 0 when none
};

}  // namespace ccl::transport::shm
