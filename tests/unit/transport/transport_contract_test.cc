// SPDX-License-Identifier: BSD-3-Clause
// The transport contract (transport/transport.h), run over the transport CCL_TEST_TRANSPORT
// names (ucx when unset; ctest runs it over ucx, ucx on TCP, ucx with UCX's peer errors, shm
// and local): ranks as threads, each with its bootstrap and transport.
#include "transport/factory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <thread>
#include <vector>

#include "transport_test_util.h"

namespace ccl::test {
namespace {

using bootstrap::Bootstrap;
using transport::Request;
using transport::Transport;

std::vector<uint8_t> payload(int from, int to, uint64_t tag, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(from * 37 + to * 11 + tag * 5 + i * 3 + (i >> 9));
  return v;
}

std::string testTransport() {
  const char* name = std::getenv("CCL_TEST_TRANSPORT");
  return name && *name ? name : "ucx";
}

// Runs fn(rank, bootstrap, transport) on n thread ranks over a fresh communicator. Ranks
// meet at a barrier before their transport is destroyed.
void runOn(int n, const std::function<void(int, Bootstrap&, Transport&)>& fn) {
  cclUniqueId id = newId();
  expectAllSucceeded(runRanks(n, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, n, kJoinTimeout);
    auto t = transport::createTransport(testTransport(), *bs);
    ASSERT_EQ(t->rank(), rank);
    ASSERT_EQ(t->size(), n);
    fn(rank, *bs, *t);
    bs->barrier();
  }));
}

struct SendRecvCase {
  size_t bytes;
  bool recvFirst;
};

void PrintTo(const SendRecvCase& c, std::ostream* os) {
  *os << c.bytes << (c.recvFirst ? " bytes, receive first" : " bytes, send first");
}

class SendRecv : public ::testing::TestWithParam<SendRecvCase> {};

// Every rank exchanges a message with every rank, itself included.
TEST_P(SendRecv, AllPairsIncludingSelf) {
  const auto [bytes, recvFirst] = GetParam();
  constexpr int n = 3;
  constexpr uint64_t tag = 12345;
  runOn(n, [&](int rank, Bootstrap& bs, Transport& t) {
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(bytes + 1, 0xee));
    std::vector<std::vector<uint8_t>> out(n);
    std::vector<std::unique_ptr<Request>> recvs(n), sends(n);
    auto postRecvs = [&] {
      for (int p = 0; p < n; ++p) recvs[p] = t.irecv(p, tag, in[p].data(), bytes);
    };
    if (recvFirst) {
      postRecvs();
      bs.barrier();  // every receive is posted before any send
    }
    for (int p = 0; p < n; ++p) {
      out[p] = payload(rank, p, tag, bytes);
      sends[p] = t.isend(p, tag, out[p].data(), bytes);
    }
    if (!recvFirst) {
      bs.barrier();  // every send is posted (and maybe arrived unexpected) before the receives
      postRecvs();
    }
    for (int p = 0; p < n; ++p) {
      waitFor(t, *recvs[p]);
      EXPECT_EQ(recvs[p]->receivedBytes(), bytes);
      EXPECT_TRUE(std::equal(in[p].begin(), in[p].begin() + bytes, payload(p, rank, tag, bytes).begin()))
          << "from " << p;
      EXPECT_EQ(in[p][bytes], 0xee) << "wrote past the message";
    }
    for (auto& s : sends) waitFor(t, *s);
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, SendRecv,
                         ::testing::Values(SendRecvCase{0, true}, SendRecvCase{0, false}, SendRecvCase{1, true},
                                           SendRecvCase{1, false}, SendRecvCase{4099, true}, SendRecvCase{4099, false},
                                           SendRecvCase{(1 << 20) + 13, true}, SendRecvCase{(1 << 20) + 13, false}),
                         [](const auto& info) {
                           return std::to_string(info.param.bytes) +
                                  (info.param.recvFirst ? "_RecvFirst" : "_SendFirst");
                         });

TEST(Transport, SingleRank) {
  runOn(1, [](int, Bootstrap&, Transport& t) {
    int x = 7, y = 0;
    auto r = t.irecv(0, 3, &y, sizeof(y));
    auto s = t.isend(0, 3, &x, sizeof(x));
    waitFor(t, *s);
    waitFor(t, *r);
    EXPECT_EQ(y, 7);
  });
}

// Receives match by tag; messages with the same tag arrive in posting order.
TEST(Transport, TagMatchingOrder) {
  runOn(2, [](int rank, Bootstrap& bs, Transport& t) {
    constexpr int kPerTag = 5;
    const uint64_t tags[2] = {1, transport::kTagMask};
    if (rank == 0) {
      std::vector<int> values(2 * kPerTag);
      std::vector<std::unique_ptr<Request>> sends;
      for (int i = 0; i < kPerTag; ++i)
        for (int k = 0; k < 2; ++k) {
          values[i * 2 + k] = 1000 * k + i;
          sends.push_back(t.isend(1, tags[k], &values[i * 2 + k], sizeof(int)));
        }
      for (auto& s : sends) waitFor(t, *s);
      bs.barrier();
    } else {
      bs.barrier();  // all messages are sent before any receive is posted
      std::vector<int> got(2 * kPerTag, -1);
      std::vector<std::unique_ptr<Request>> recvs;
      for (int k = 1; k >= 0; --k)  // second tag first
        for (int i = 0; i < kPerTag; ++i) recvs.push_back(t.irecv(0, tags[k], &got[k * kPerTag + i], sizeof(int)));
      for (auto& r : recvs) waitFor(t, *r);
      for (int k = 0; k < 2; ++k)
        for (int i = 0; i < kPerTag; ++i) EXPECT_EQ(got[k * kPerTag + i], 1000 * k + i);
    }
  });
}

// Receives match per (source, tag) in posting order whichever is waited for first: the last
// posted is waited for first, the receives for the second tag posted before those for the
// first, the messages sent before the receives are posted and after.
TEST(Transport, ReceivesMatchInPostingOrderWhicheverIsWaitedForFirst) {
  runOn(2, [](int rank, Bootstrap& bs, Transport& t) {
    constexpr int kPerTag = 4;
    const uint64_t tags[2] = {7, 8};
    for (bool recvFirst : {true, false}) {
      if (rank == 0) {
        if (recvFirst) bs.barrier();  // rank 1 has posted its receives
        std::vector<int> values(2 * kPerTag);
        std::vector<std::unique_ptr<Request>> sends;
        for (int k = 0; k < 2; ++k)
          for (int i = 0; i < kPerTag; ++i) {
            values[k * kPerTag + i] = 100 * k + i;
            sends.push_back(t.isend(1, tags[k], &values[k * kPerTag + i], sizeof(int)));
          }
        for (auto& s : sends) waitFor(t, *s);
        if (!recvFirst) bs.barrier();  // every message is sent before a receive is posted
      } else {
        if (!recvFirst) bs.barrier();
        std::vector<int> got(2 * kPerTag, -1);
        std::vector<std::unique_ptr<Request>> recvs;
        for (int k = 1; k >= 0; --k)
          for (int i = 0; i < kPerTag; ++i) recvs.push_back(t.irecv(0, tags[k], &got[k * kPerTag + i], sizeof(int)));
        if (recvFirst) bs.barrier();
        for (auto r = recvs.rbegin(); r != recvs.rend(); ++r) waitFor(t, **r);
        for (int k = 0; k < 2; ++k)
          for (int i = 0; i < kPerTag; ++i)
            EXPECT_EQ(got[k * kPerTag + i], 100 * k + i)
                << "tag " << tags[k] << " receive " << i << (recvFirst ? ", posted first" : ", posted last");
      }
      bs.barrier();
    }
  });
}

// The source is part of the match: a receive from rank 1 never takes rank 2's message.
TEST(Transport, SourceMatching) {
  runOn(3, [](int rank, Bootstrap& bs, Transport& t) {
    if (rank == 0) {
      int from1 = -1, from2 = -1;
      bs.barrier();
      auto r2 = t.irecv(2, 9, &from2, sizeof(int));
      auto r1 = t.irecv(1, 9, &from1, sizeof(int));
      waitFor(t, *r1);
      waitFor(t, *r2);
      EXPECT_EQ(from1, 100);
      EXPECT_EQ(from2, 200);
    } else {
      int v = rank * 100;
      auto s = t.isend(0, 9, &v, sizeof(v));
      waitFor(t, *s);
      bs.barrier();
    }
  });
}

TEST(Transport, TruncationIsInvalidUsage) {
  for (size_t bytes : {size_t{100}, size_t{1} << 20}) {
    std::atomic<bool> sent{false};
    runOn(2, [&](int rank, Bootstrap& bs, Transport& t) {
      std::vector<uint8_t> buf(bytes, 1);
      if (rank == 0) {
        auto s = t.isend(1, 5, buf.data(), bytes);
        try {
          waitFor(t, *s);  // the sender may or may not learn of the truncation
        } catch (const Error&) {
        }
        sent = true;
      } else {
        auto r = t.irecv(0, 5, buf.data(), bytes / 10);
        try {
          waitFor(t, *r);
          ADD_FAILURE() << "a truncated receive of " << bytes << " bytes succeeded";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), cclInvalidUsage) << e.what();
        }
        // A receiver keeps making progress, as a communicator's does: the rest of the
        // message may still have to leave the sender through it.
        while (!sent) t.progress();
      }
      bs.barrier();
    });
  }
}

TEST(Transport, InvalidArguments) {
  runOn(2, [](int, Bootstrap&, Transport& t) {
    int x = 0;
    EXPECT_THROW((void)t.isend(2, 0, &x, sizeof(x)), Error);
    EXPECT_THROW((void)t.irecv(-1, 0, &x, sizeof(x)), Error);
    EXPECT_THROW((void)t.isend(0, transport::kTagMask + 1, &x, sizeof(x)), Error);
    EXPECT_THROW((void)t.irecv(0, 0, nullptr, 4), Error);
  });
}

// A receive in place's sink, checking the contract's pieces: in order, back to back, every
// one but the last a multiple of kPieceAlign bytes; it keeps a copy of what it took.
class Collect final : public transport::Sink {
 public:
  explicit Collect(size_t bytes) : got(bytes, 0) {}
  void take(size_t offset, const void* data, size_t bytes) override {
    if (offset != taken || offset + bytes > got.size()) {
      bad = true;
      return;
    }
    if (lastWasShort) bad = true;  // a piece off the alignment was not the last
    lastWasShort = bytes % transport::kPieceAlign != 0;
    std::memcpy(got.data() + offset, data, bytes);
    taken += bytes;
    ++pieces;
  }
  std::vector<uint8_t> got;
  size_t taken = 0, pieces = 0;
  bool bad = false, lastWasShort = false;
};

// Receives in place at the sizes around the channel's fragments and its ring's wrap, sent
// before and after the receive is posted, from a peer and from itself. A transport may
// decline (null): its messages are then received as usual.
TEST(Transport, ReceiveInPlace) {
  constexpr size_t kFragment = (256 << 10) / 4 - 32;  // the shared-memory channel's
  const size_t sizes[] = {
      0, 1, 15, 16, 17, 4099, kFragment - 1, kFragment, kFragment + 1, 3 * kFragment + 40, 256 << 10, (1 << 20) + 13};
  runOn(2, [&](int rank, Bootstrap& bs, Transport& t) {
    const int peer = 1 - rank;
    uint64_t tag = 100;
    size_t inPlace = 0;
    for (size_t bytes : sizes)
      for (bool recvFirst : {true, false})
        for (int from : {peer, rank}) {
          ++tag;
          const int to = from;  // the peer sends to this rank what this rank sends to it
          const auto out = payload(rank, to, tag, bytes);
          Collect sink(bytes);
          std::unique_ptr<Request> r, s;
          auto post = [&] {
            r = t.irecvInPlace(from, tag, bytes, &sink);
            if (r) ++inPlace;
            if (!r) r = t.irecv(from, tag, sink.got.data(), bytes);
          };
          if (recvFirst) post();
          bs.barrier();
          s = t.isend(to, tag, out.data(), bytes);
          bs.barrier();
          if (!recvFirst) {
            for (int i = 0; i < 100; ++i) t.progress();  // the message arrives first
            post();
          }
          waitFor(t, *r);
          waitFor(t, *s);
          EXPECT_EQ(r->receivedBytes(), bytes);
          EXPECT_FALSE(sink.bad) << bytes << " bytes: pieces out of order or off the alignment";
          EXPECT_TRUE(sink.got == payload(from, rank, tag, bytes)) << bytes << " bytes from " << from;
          bs.barrier();
        }
    if (testTransport() != "ucx") {
      EXPECT_GT(inPlace, 0u) << t.name() << " read nothing in place";
    }
  });
}

// A message larger than the receive in place fails it, and its sink sees none of it.
TEST(Transport, ReceiveInPlaceTruncationIsInvalidUsage) {
  std::atomic<bool> sent{false};
  runOn(2, [&](int rank, Bootstrap& bs, Transport& t) {
    std::vector<uint8_t> buf(100000, 7);
    if (rank == 0) {
      bs.barrier();
      auto s = t.isend(1, 3, buf.data(), buf.size());
      try {
        waitFor(t, *s);
      } catch (const Error&) {
      }
      sent = true;
    } else {
      Collect sink(1000);
      auto r = t.irecvInPlace(0, 3, 1000, &sink);
      // Declined: the message is taken whole (irecv's truncation is TruncationIsInvalidUsage's).
      if (!r) r = t.irecv(0, 3, buf.data(), buf.size());
      bs.barrier();
      try {
        waitFor(t, *r);
        EXPECT_EQ(r->receivedBytes(), buf.size()) << "a truncated receive in place succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclInvalidUsage) << e.what();
      }
      EXPECT_EQ(sink.taken, 0u);
      while (!sent) t.progress();  // the rest of the message leaves the sender through this rank
    }
    bs.barrier();
  });
}

// A sink that takes the pieces before offset `refuseAt` and throws at the piece that reaches
// it, as a reduce that refuses the data would.
class Refuse final : public transport::Sink {
 public:
  explicit Refuse(size_t refuseAt) : refuseAt(refuseAt) {}
  void take(size_t offset, const void*, size_t bytes) override {
    if (threw) ++callsAfterThrowing;
    if (offset + bytes <= refuseAt) return;
    threw = true;
    throw Error(cclInvalidUsage, "the sink refused the piece at offset " + std::to_string(offset));
  }
  size_t refuseAt;
  bool threw = false;
  int callsAfterThrowing = 0;
};

// Waits for `r` as waitFor does, but what fails must be the request: progress() throwing is
// a failure of the test. Returns the request's error message ("" when it completed).
std::string failureOf(Transport& t, Request& r, const char* which = "the request") {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    try {
      if (r.test()) return "";
    } catch (const Error& e) {
      return e.what();
    }
    try {
      t.progress();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "progress() threw: " << e.what();
      return "";
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << which << " neither completed nor failed";
      return "";
    }
  }
}

// A receive in place whose sink throws fails with what the sink threw, from its test() and
// on every later call, wherever the transport ran the sink (a post, its progress, a send to
// itself); the sink is called no more, the transport goes on, and the next message with the
// same tag from the same rank is received whole: the refused one was consumed and dropped.
// Before, the exception escaped a post or progress() and the request was never completed.
TEST(Transport, AReceiveInPlaceWhoseSinkThrowsFails) {
  if (testTransport() == "ucx") GTEST_SKIP() << "UCX receives nothing in place";
  constexpr size_t kBig = (1 << 20) + 13;  // many fragments of the shared-memory channel
  struct Case {
    size_t bytes, refuseAt;
  };
  const Case cases[] = {{64, 0}, {kBig, 0}, {kBig, kBig / 2}};
  std::atomic<int> sendsDone{0};
  runOn(2, [&](int rank, Bootstrap& bs, Transport& t) {
    const int peer = 1 - rank;
    uint64_t tag = 200;
    int round = 0;
    for (const Case& c : cases)
      for (bool recvFirst : {true, false})
        for (int from : {peer, rank}) {
          ++tag;
          const int to = from;  // the peer sends to this rank what this rank sends to it
          const std::string what = std::to_string(c.bytes) + " bytes refused at " + std::to_string(c.refuseAt) +
                                   (recvFirst ? ", receive first" : ", send first") +
                                   (from == rank ? ", from itself" : ", from the peer");
          SCOPED_TRACE(what);
          const auto out = payload(rank, to, tag, c.bytes);
          Refuse sink(c.refuseAt);
          std::unique_ptr<Request> r, s;
          auto post = [&] {
            try {
              r = t.irecvInPlace(from, tag, c.bytes, &sink);
            } catch (const std::exception& e) {
              ADD_FAILURE() << what << ": the post threw: " << e.what();
            }
          };
          if (recvFirst) post();
          bs.barrier();
          try {
            s = t.isend(to, tag, out.data(), c.bytes);
          } catch (const std::exception& e) {
            ADD_FAILURE() << what << ": the send threw: " << e.what();
          }
          bs.barrier();
          if (!recvFirst) {
            for (int i = 0; i < 100; ++i) t.progress();  // the message arrives first
            post();
          }
          ASSERT_TRUE(r && s) << what << ": " << t.name() << " must receive in place";
          const std::string failure = failureOf(t, *r, "the refused receive");
          EXPECT_NE(failure.find("the sink refused"), std::string::npos) << what << ": " << failure;
          try {
            r->test();
            ADD_FAILURE() << what << ": a failed receive did not fail again";
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), cclInvalidUsage) << what << ": " << e.what();
          }
          EXPECT_EQ(failureOf(t, *s, "the send"), "") << what << ": the send";
          // The rest of the peer's message may still have to leave it through this rank.
          ++sendsDone;
          for (const int both = 2 * ++round; sendsDone.load() < both;) t.progress();
          r.reset();
          // The next message with the tag, whole.
          const auto next = payload(rank, to, tag + 1000, 100);
          std::vector<uint8_t> got(100, 0);
          auto r2 = t.irecv(from, tag, got.data(), got.size());
          bs.barrier();
          auto s2 = t.isend(to, tag, next.data(), next.size());
          EXPECT_EQ(failureOf(t, *r2, "the next receive"), "") << what << ": the next message";
          EXPECT_EQ(failureOf(t, *s2, "the next send"), "") << what << ": the next send";
          EXPECT_TRUE(got == payload(from, rank, tag + 1000, 100)) << what << ": the next message's bytes";
          EXPECT_EQ(sink.callsAfterThrowing, 0) << what;
          bs.barrier();
        }
  });
}

// A receive destroyed while pending is cancelled: the next receive with the same tag gets
// the message, and the dropped buffer is never written.
TEST(Transport, DestroyedPendingRecvIsCancelled) {
  runOn(2, [](int rank, Bootstrap& bs, Transport& t) {
    if (rank == 1) {
      auto dropped = std::make_unique<std::vector<uint8_t>>(64, 0);
      {
        auto r = t.irecv(0, 4, dropped->data(), 64);
        for (int i = 0; i < 10; ++i) t.progress();
      }
      bs.barrier();
      std::vector<uint8_t> got(64, 0);
      auto r = t.irecv(0, 4, got.data(), 64);
      waitFor(t, *r);
      EXPECT_EQ(got, payload(0, 1, 4, 64));
      EXPECT_EQ(*dropped, std::vector<uint8_t>(64, 0));
    } else {
      bs.barrier();
      auto data = payload(0, 1, 4, 64);
      auto s = t.isend(1, 4, data.data(), data.size());
      waitFor(t, *s);
    }
  });
}

// A large send that nobody receives cannot complete; destroying it must still return soon
// (the transport abandons it after a short grace, closing its endpoint) so the caller may
// free the buffer, and it must leave the rest of the transport working: every pair but the
// abandoned one (whose endpoint may now be closed) still exchanges messages, self included.
TEST(Transport, DestroyedPendingSendReturns) {
  constexpr int n = 3;
  constexpr uint64_t tag = 6;
  // Far above the grace plus the bounded endpoint close, far below the runner's deadline.
  constexpr auto kDestroyBound = std::chrono::seconds(10);
  runOn(n, [&](int rank, Bootstrap& bs, Transport& t) {
    if (rank == 0) {
      auto buf = std::make_unique<std::vector<uint8_t>>(size_t{4} << 20, 7);
      auto s = t.isend(1, tag, buf->data(), buf->size());
      for (int i = 0; i < 10; ++i) t.progress();
      const auto start = std::chrono::steady_clock::now();
      s.reset();
      const auto took = std::chrono::steady_clock::now() - start;
      EXPECT_LT(took, kDestroyBound) << "destroying a pending send took "
                                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
      buf.reset();
    }
    bs.barrier();
    auto abandoned = [](int a, int b) { return (a == 0 && b == 1) || (a == 1 && b == 0); };
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(100)), out(n);
    std::vector<std::unique_ptr<Request>> reqs;
    for (int p = 0; p < n; ++p) {
      if (abandoned(rank, p)) continue;
      reqs.push_back(t.irecv(p, tag + 1, in[p].data(), in[p].size()));
      out[p] = payload(rank, p, tag + 1, in[p].size());
      reqs.push_back(t.isend(p, tag + 1, out[p].data(), out[p].size()));
    }
    for (auto& r : reqs) waitFor(t, *r);
    for (int p = 0; p < n; ++p) {
      if (abandoned(rank, p)) continue;
      EXPECT_EQ(in[p], payload(p, rank, tag + 1, in[p].size())) << "from " << p;
    }
  });
}

// A rank that leaves (destroys its transport) after its send completed: the message is its
// peer's, which posts the receive only later. (UCX failed such a receive at once once it knew
// the sender gone, although the message had arrived.)
TEST(Transport, AMessageThatArrivedBeforeItsSenderLeftIsStillReceived) {
  cclUniqueId id = newId();
  expectAllSucceeded(runRanks(2, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
    auto t = transport::createTransport(testTransport(), *bs);
    const std::vector<uint8_t> sent = payload(1, 0, 9, 64);
    if (rank == 1) {
      {
        auto s = t->isend(0, 9, sent.data(), sent.size());
        waitFor(*t, *s);
      }               // a request goes before its transport
      bs->barrier();  // sent
      t.reset();      // left
      bs->barrier();
      return;
    }
    bs->barrier();
    bs->barrier();
    const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < settle) t->progress();  // the departure is seen
    std::vector<uint8_t> got(64, 0);
    auto r = t->irecv(1, 9, got.data(), got.size());
    waitFor(*t, *r);
    EXPECT_EQ(got, sent);
  }));
}

// A rank that leaves in the middle of a message nobody had posted a receive for: the
// receive posted afterwards fails, instead of waiting forever for the rest (the channel
// kept the part that arrived as a message still to come). The shared-memory channel's
// case: it is the transport that reads a message's fragments before a receive is posted.
TEST(Transport, AReceiveOfAMessageItsSenderLeftHalfSentFails) {
  if (testTransport() != "shm") GTEST_SKIP() << "the shared-memory channel's fragments; over UCX a send is whole";
  cclUniqueId id = newId();
  expectAllSucceeded(runRanks(2, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
    auto t = transport::createTransport(testTransport(), *bs);
    const size_t big = size_t{8} << 20;  // more than a ring holds
    if (rank == 1) {
      std::vector<uint8_t> data(big, 1);
      auto s = t->isend(0, 5, data.data(), big);
      for (int i = 0; i < 1000; ++i) t->progress();
      s.reset();  // cancelled part way
      t.reset();  // left
      bs->barrier();
      return;
    }
    bs->barrier();
    const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < settle) t->progress();
    std::vector<uint8_t> got(big);
    auto r = t->irecv(1, 5, got.data(), big);
    try {
      waitFor(*t, *r);
      ADD_FAILURE() << "a receive of a message half sent completed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclRemoteError) << e.what();
    }
  }));
}

TEST(Transport, AbortFailsPendingRecvPromptly) {
  runOn(2, [](int rank, Bootstrap& bs, Transport& t) {
    if (rank == 0) {
      int x = 0;
      auto r = t.irecv(1, 8, &x, sizeof(x));  // rank 1 never sends
      std::vector<uint8_t> big(size_t{4} << 20, 1);
      auto pendingSend = t.isend(1, 9, big.data(), big.size());  // nor receives
      const bool sentAtOnce = std::string(t.name()) == "local";
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        t.abort();
      });
      std::string what;
      try {
        waitFor(t, *r);
        ADD_FAILURE() << "receive completed without a sender";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclRemoteError);
        what = e.what();
      }
      aborter.join();
      EXPECT_NE(what.find("aborted"), std::string::npos) << what;
      try {
        // The in-process transport's sends complete at once, in the receiver's mailbox.
        if (!sentAtOnce) {
          waitFor(t, *pendingSend);
          ADD_FAILURE() << "a send nobody receives completed after the abort";
        }
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclRemoteError) << e.what();
      }
      auto s = t.isend(1, 8, &x, sizeof(x));  // requests after the abort fail too
      EXPECT_THROW(waitFor(t, *s), Error);
    }
    bs.barrier();
  });
}

// An abort reaches ranks that are not even waiting on the aborting rank: rank 0 aborts,
// ranks 1 and 2 wait on each other and fail instead of waiting for their timeout.
TEST(Transport, AbortReachesEveryRank) {
  runOn(3, [](int rank, Bootstrap& bs, Transport& t) {
    bs.barrier();
    if (rank == 0) {
      t.abort();
      t.progress();  // the driving thread applies the abort and tells the peers
    } else {
      int x = 0;
      auto r = t.irecv(3 - rank, 2, &x, sizeof(x));  // neither 1 nor 2 ever sends
      try {
        waitFor(t, *r);
        ADD_FAILURE() << "receive completed without a sender";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclRemoteError) << e.what();
        EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
      }
    }
    bs.barrier();
  });
}

// An abort spreads through every rank, each passing it on, but every rank names the rank that
// started it, not the first that passed it on (a peer's call that fails says whose failure
// it was). The last rank aborts: the shared-memory channel looks at its peers in rank order,
// so the lower ranks' passing it on is what most ranks see first there.
TEST(Transport, EveryRankNamesTheRankThatAborted) {
  constexpr int n = 4;
  for (bool mismatch : {false, true}) {
    runOn(n, [&](int rank, Bootstrap& bs, Transport& t) {
      bs.barrier();
      if (rank == n - 1) {
        mismatch ? t.abortMismatch() : t.abort();
        t.progress();  // the driving thread applies the abort and tells the peers
      } else {
        int x = 0;
        auto r = t.irecv((rank + 1) % (n - 1), 4, &x, sizeof(x));  // nobody sends
        const std::string named = "rank " + std::to_string(n - 1) + (mismatch ? " found" : " aborted");
        try {
          waitFor(t, *r);
          ADD_FAILURE() << "receive completed without a sender";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), mismatch ? cclInvalidUsage : cclRemoteError) << e.what();
          EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << "rank " << rank << ": " << e.what();
        }
        const Transport::AbortState s = t.abortState();
        EXPECT_TRUE(s.aborted) << "rank " << rank;
        EXPECT_EQ(s.mismatch, mismatch) << "rank " << rank;
        EXPECT_EQ(s.by, n - 1) << "rank " << rank;
      }
      bs.barrier();
    });
  }
}

// Many messages in flight between all pairs, on several tags, as a collective would post.
TEST(Transport, ManyRanksManyMessages) {
  constexpr int n = 6, kTags = 4;
  constexpr size_t kBytes = 3000;
  runOn(n, [](int rank, Bootstrap&, Transport& t) {
    std::vector<std::vector<uint8_t>> in(n * kTags, std::vector<uint8_t>(kBytes)), out(n * kTags);
    std::vector<std::unique_ptr<Request>> reqs;
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < kTags; ++k) {
        reqs.push_back(t.irecv(p, k, in[p * kTags + k].data(), kBytes));
        out[p * kTags + k] = payload(rank, p, k, kBytes);
        reqs.push_back(t.isend(p, k, out[p * kTags + k].data(), kBytes));
      }
    for (auto& r : reqs) waitFor(t, *r);
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < kTags; ++k) EXPECT_EQ(in[p * kTags + k], payload(p, rank, k, kBytes));
  });
}

TEST(Transport, ConcurrentCommunicators) {
  constexpr int kComms = 3, kRanks = 2;
  std::vector<cclUniqueId> ids;
  for (int c = 0; c < kComms; ++c) ids.push_back(newId());
  expectAllSucceeded(runRanks(kComms * kRanks, [&](int th) {
    const int comm = th % kComms, rank = th / kComms, peer = 1 - rank;
    auto bs = Bootstrap::connect(ids[comm], rank, kRanks, kJoinTimeout);
    auto t = transport::createTransport(testTransport(), *bs);
    auto out = payload(rank, comm, 0, 5000);
    std::vector<uint8_t> in(5000);
    auto r = t->irecv(peer, 0, in.data(), in.size());
    auto s = t->isend(peer, 0, out.data(), out.size());
    waitFor(*t, *r);
    waitFor(*t, *s);
    EXPECT_EQ(in, payload(peer, comm, 0, 5000));
    bs->barrier();
  }));
}

}  // namespace
}  // namespace ccl::test
