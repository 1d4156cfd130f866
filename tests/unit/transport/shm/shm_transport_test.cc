// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory channel's own tests (the transport contract runs over it in
// transport_contract_test, "shm." prefix): its ring raced by a producer and a consumer
// thread, its segments' checks, and ranks as processes killed in the middle of a message or
// all at once.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.h"
#include "transport/factory.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport_test_util.h"

namespace ccl::test {
namespace {

using bootstrap::Bootstrap;
using transport::shm::FragmentHeader;
using transport::shm::RingReader;
using transport::shm::RingWriter;

uint8_t byteOf(uint64_t message, size_t i) { return static_cast<uint8_t>(message * 131 + i * 7 + (i >> 8)); }

struct RingMemory {
  explicit RingMemory(size_t capacity)
      : bytes(transport::shm::ringFootprint(capacity)), base(std::aligned_alloc(64, (bytes + 63) / 64 * 64)) {
    transport::shm::initRing(base, capacity);
  }
  ~RingMemory() { std::free(base); }
  size_t bytes;
  void* base;
};

// A producer and a consumer thread through a small ring: every payload size from 0 to the
// largest fragment (every record boundary, every wrap-around position), in order, intact.
// Under TSan this is the check that the counters order the bytes.
TEST(ShmRing, ProducerAndConsumerRaceThroughWrapAround) {
  constexpr size_t kCapacity = 4096;
  RingMemory m(kCapacity);
  RingWriter w(m.base, kCapacity);
  RingReader r(m.base, kCapacity);
  const size_t largest = w.maxFragment();
  constexpr int kRounds = 40;
  const uint64_t messages = static_cast<uint64_t>(kRounds) * (largest + 1);
  std::thread producer([&] {
    std::vector<uint8_t> buf(largest);
    for (uint64_t k = 0; k < messages; ++k) {
      const size_t n = k % (largest + 1);
      for (size_t i = 0; i < n; ++i) buf[i] = byteOf(k, i);
      while (!w.tryPush(FragmentHeader{k, n, n, 0}, buf.data())) std::this_thread::yield();
    }
  });
  std::vector<uint8_t> got(largest);
  uint64_t wrong = 0;
  for (uint64_t k = 0; k < messages; ++k) {
    FragmentHeader h{};
    while (!r.peek(&h)) std::this_thread::yield();
    const size_t n = k % (largest + 1);
    if (h.tag != k || h.bytes != n || h.total != n) {
      ADD_FAILURE() << "message " << k << ": header tag " << h.tag << " bytes " << h.bytes;
      break;
    }
    r.copyPayload(got.data(), 0, n);
    for (size_t i = 0; i < n; ++i) wrong += got[i] != byteOf(k, i);
    r.pop();
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(r.empty());
}

// A full ring refuses a record whole (nothing written) until the consumer releases one.
TEST(ShmRing, AFullRingRefusesUntilARecordIsReleased) {
  constexpr size_t kCapacity = 1024;
  RingMemory m(kCapacity);
  RingWriter w(m.base, kCapacity);
  RingReader r(m.base, kCapacity);
  std::vector<uint8_t> payload(200, 9);
  int pushed = 0;
  while (w.tryPush(FragmentHeader{7, 200, 200, 0}, payload.data())) ++pushed;
  // Every record leaves room for the next one's header: (1024 - 32) / 256 records.
  EXPECT_EQ(pushed, static_cast<int>((kCapacity - sizeof(FragmentHeader)) / transport::shm::recordBytes(200)));
  FragmentHeader h{};
  ASSERT_TRUE(r.peek(&h));
  EXPECT_EQ(h.bytes, 200u);
  EXPECT_FALSE(w.tryPush(FragmentHeader{7, 200, 200, 0}, payload.data())) << "not released yet";
  r.pop();
  EXPECT_TRUE(w.tryPush(FragmentHeader{7, 200, 200, 0}, payload.data()));
}

// A segment is opened only with its communicator's token, and only when it is this user's.
TEST(ShmSegment, ForeignOrForgedSegmentsAreRefused) {
  uint8_t token[16], other[16];
  for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(i * 17 + 3), other[i] = static_cast<uint8_t>(i);
  const std::string name =
      transport::shm::segmentName(token, transport::shm::pidNamespace(), 99, static_cast<int>(getpid()));
  auto made = transport::shm::Segment::create(name, 4096);
  made.header()->magic = transport::shm::kSegmentMagic;
  std::memcpy(made.header()->token, token, 16);
  std::string why;
  EXPECT_TRUE(transport::shm::Segment::open(name, 4096, token, &why).mapped()) << why;
  EXPECT_FALSE(transport::shm::Segment::open(name, 4096, other, &why).mapped());
  EXPECT_NE(why.find("token"), std::string::npos) << why;
  EXPECT_FALSE(transport::shm::Segment::open(name, 8192, token, &why).mapped()) << "another size";
  made.header()->magic = 0;
  EXPECT_FALSE(transport::shm::Segment::open(name, 4096, token, &why).mapped()) << "not ccl's";
  made.unlink();
  EXPECT_FALSE(transport::shm::Segment::open(name, 4096, token, &why).mapped()) << "unlinked";
}

// A segment whose creator was killed before its peers mapped it is removed by the next
// channel made on the host (its name carries the creator's pid); a live creator's stays, and
// so does one made in another PID namespace, whose pid names no process of this one (a rank
// in a container of its own, sharing /dev/shm: sweeping it took a live rank's segment).
TEST(ShmSegment, SegmentsOfKilledRanksAreSweptAway) {
  namespace shm = transport::shm;
  uint8_t token[16];
  for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(200 + i);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // a pid no live process has (until the system reuses it)
  const uint64_t ns = shm::pidNamespace();
  const std::string deadName = shm::segmentName(token, ns, 0, child);
  const std::string liveName = shm::segmentName(token, ns, 1, static_cast<int>(getpid()));
  const std::string foreignName = shm::segmentName(token, ns + 1, 2, child);
  auto dead = shm::Segment::create(deadName, 4096);
  auto live = shm::Segment::create(liveName, 4096);
  auto foreign = shm::Segment::create(foreignName, 4096);
  for (shm::Segment* s : {&dead, &live, &foreign}) {
    s->header()->magic = shm::kSegmentMagic;
    std::memcpy(s->header()->token, token, 16);
  }
  EXPECT_GE(shm::sweepStaleSegments(), 1);
  std::string why;
  EXPECT_FALSE(shm::Segment::open(deadName, 4096, token, &why).mapped()) << "the dead rank's segment is still there";
  EXPECT_TRUE(shm::Segment::open(liveName, 4096, token, &why).mapped()) << why;
  EXPECT_TRUE(shm::Segment::open(foreignName, 4096, token, &why).mapped())
      << "another PID namespace's segment was swept: " << why;
}

std::set<std::string> cclSegments() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "ccl-", 4) == 0) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

std::unique_ptr<transport::Transport> shmOf(Bootstrap& bs) { return transport::createTransport("shm", bs); }

// A rank killed while its 64 MiB message is part way through the ring: the survivor's receive
// fails with cclRemoteError naming it, and does not hang (the channel checks the peer's
// process every 100 ms while it waits; the figure is printed, a generous bound asserted).
TEST(ShmProcesses, APeerKilledMidMessageFailsTheSurvivor) {
  constexpr size_t kBytes = size_t{64} << 20;
  auto codes = forkRanks(
      2,
      [&](int rank, const cclUniqueId& id) {
        auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
        auto t = shmOf(*bs);
        std::vector<uint8_t> buf(kBytes, 5);
        bs->barrier();
        if (rank == 1) {
          auto s = t->isend(0, 3, buf.data(), buf.size());
          // A ring-full goes (the receiver is not reading yet), then the process dies with
          // the message part way sent.
          for (int i = 0; i < 100; ++i) t->progress();
          kill(getpid(), SIGKILL);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        auto r = t->irecv(1, 3, buf.data(), buf.size());
        const auto start = std::chrono::steady_clock::now();
        try {
          waitFor(*t, *r);
        } catch (const Error& e) {
          const auto ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
          fprintf(stderr, "rank 0 (expected failure after %lld ms): %s\n", static_cast<long long>(ms), e.what());
          const bool named = std::string(e.what()).find("rank 1") != std::string::npos;
          return int(e.code() == cclRemoteError && named && ms < 10000 ? kOk : kError);
        }
        return int{kWrongData};
      },
      std::chrono::seconds(60));
  EXPECT_EQ(codes[0], kOk) << "the survivor's stderr says why";
  EXPECT_EQ(codes[1], -1);  // killed by SIGKILL
}

// Every rank killed at once after the channel is up leaves no segment in /dev/shm: each is
// unlinked as soon as the host's ranks have mapped it.
// Only the segments of these ranks count (named after their creator's pid, which each rank
// reports): tests that run beside this one make and remove segments of their own meanwhile.
TEST(ShmProcesses, RanksKilledTogetherLeaveNothingInDevShm) {
  const std::set<std::string> before = cclSegments();
  int pids[2];
  ASSERT_EQ(pipe(pids), 0);
  auto codes = forkRanks(
      3,
      [&](int rank, const cclUniqueId& id) {
        const int me = static_cast<int>(getpid());
        if (write(pids[1], &me, sizeof(me)) != static_cast<ssize_t>(sizeof(me))) return int{kError};
        auto bs = Bootstrap::connect(id, rank, 3, kJoinTimeout);
        auto t = shmOf(*bs);
        int x = rank;
        auto s = t->isend((rank + 1) % 3, 1, &x, sizeof(x));  // the rings in use
        t->progress();
        bs->barrier();
        kill(getpid(), SIGKILL);
        return int{kError};
      },
      std::chrono::seconds(60));
  for (int c : codes) EXPECT_EQ(c, -1);
  close(pids[1]);
  std::set<std::string> suffixes;  // "-PID" of each rank
  for (int pid = 0; read(pids[0], &pid, sizeof(pid)) == static_cast<ssize_t>(sizeof(pid));)
    suffixes.insert(std::string(1, '-').append(std::to_string(pid)));
  close(pids[0]);
  EXPECT_EQ(suffixes.size(), 3u);
  const std::set<std::string> after = cclSegments();
  for (const std::string& name : after) {
    const size_t dash = name.rfind('-');
    if (dash != std::string::npos && suffixes.count(name.substr(dash))) {
      EXPECT_TRUE(before.count(name)) << "/dev/shm/" << name << " was left behind";
    }
  }
}

// Two ranks of one host in different PID namespaces (containers sharing /dev/shm and the host's
// name): rank 1 runs as pid 1 of a namespace of its own, where rank 0's pid names nobody.
// Rank 1 waits for a message rank 0 sends late: before, rank 1's channel took rank 0 for
// exited (its pid was not found) and failed the receive, and its sweep removed rank 0's live
// segment. Needs CAP_SYS_ADMIN for the namespace; skipped without it.
TEST(ShmProcesses, RanksInOtherPidNamespacesAreNotTakenForDead) {
  constexpr int kNoNamespace = 77;
  auto codes = forkRanks(
      2,
      [&](int rank, const cclUniqueId& id) {
        auto run = [&] {
          auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
          auto t = shmOf(*bs);
          bs->barrier();
          int value = rank == 0 ? 4242 : 0;
          if (rank == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // many looks at its process
            auto s = t->isend(1, 8, &value, sizeof(value));
            waitFor(*t, *s);
          } else {
            auto r = t->irecv(0, 8, &value, sizeof(value));
            waitFor(*t, *r);
          }
          bs->barrier();
          return int(value == 4242 ? kOk : kWrongData);
        };
        if (rank == 0) return run();
        if (unshare(CLONE_NEWPID) != 0) {  // the same exchange, in one namespace: then skipped
          const int code = run();
          return code == kOk ? kNoNamespace : code;
        }
        const pid_t inner = fork();  // pid 1 of the new namespace
        if (inner == 0) {
          int code = kError;
          try {
            code = run();
          } catch (const std::exception& e) {
            fprintf(stderr, "rank 1 in its own PID namespace: %s\n", e.what());
          }
          _exit(code);
        }
        int status = 0;
        if (inner < 0 || waitpid(inner, &status, 0) != inner || !WIFEXITED(status)) return int{kError};
        return WEXITSTATUS(status);
      },
      std::chrono::seconds(60));
  if (codes[1] == kNoNamespace) GTEST_SKIP() << "no new PID namespace here (unshare needs CAP_SYS_ADMIN)";
  EXPECT_EQ(codes[0], kOk);
  EXPECT_EQ(codes[1], kOk) << "rank 1's stderr says why";
}

}  // namespace
}  // namespace ccl::test
