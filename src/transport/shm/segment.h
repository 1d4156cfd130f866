// SPDX-License-Identifier: BSD-3-Clause
// A POSIX shared-memory segment of the channel: one per rank, holding the rings its peers on
// the host write to it. Named from the communicator's token (random, known only to its
// ranks through the secret-protected bootstrap), owned by this user with mode 0600; a
// segment of another user, of another communicator or not made by ccl is refused. The
// owner unlinks it once every peer has mapped it, so a killed job leaves nothing behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ccl::transport::shm {

constexpr uint64_t kSegmentMagic = 0x63636c73686d3031ull;  // "cclshm01"

struct SegmentHeader {
  uint64_t magic;
  uint8_t token[16];
  int32_t owner;      // the consuming rank
  int32_t pid;        // its process, for the peers' liveness checks
  uint64_t rings;     // one per rank of the host
  uint64_t capacity;  // bytes of records per ring
};

class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Creates and maps `name` (exclusively) with `bytes`; throws Error(cclSystemError).
  static Segment create(const std::string& name, size_t bytes);
  // Maps an existing `name` of `bytes` whose header carries `token`; an empty Segment
  // (and *why) when it cannot be opened or is not this communicator's.
  static Segment open(const std::string& name, size_t bytes, const uint8_t token[16], std::string* why);

  void* base() const { return base_; }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  bool mapped() const { return base_ != nullptr; }
  // Removes the name (mappings stay valid). Idempotent.
  void unlink();

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;  // while linked and ours
};

// This process's PID namespace (the inode of /proc/self/ns/pid; 0 where unknown). A pid means
// the same process only within one namespace: ranks of one host in containers of their own
// (sharing /dev/shm and the host's name, NCCL's usual advice) each have their own.
uint64_t pidNamespace();

// The segment name of `rank` (process `pid` of PID namespace `pidNs`) for a communicator
// token: "/ccl-<token>-<pidNs>-<rank>-<pid>".
std::string segmentName(const uint8_t token[16], uint64_t pidNs, int rank, int pid);

// False once `pid` has exited: gone, or a zombie its parent has not reaped yet.
bool processAlive(int pid);

// Unlinks this user's segments whose creating process has exited: what a rank killed between
// making its segment and its peers' mapping it left behind. Only segments of this process's
// PID namespace are judged (another's pid names another process here). Returns how many.
int sweepStaleSegments();

}  // namespace ccl::transport::shm
