// SPDX-License-Identifier: BSD-3-Clause
// coll::HostStream: steps run in order on the stream's thread, after enqueue returns; an
// event orders one stream after a point of another; a failing step is recorded once and the
// steps after it still run; the destructor runs what is queued.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "collectives/exec/stream.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

TEST(HostStream, StepsRunInOrderAfterEnqueueReturns) {
  HostStream s;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::vector<int> order;
  s.enqueue([open] { open.wait(); });  // holds the stream until the host lets it go
  for (int i = 0; i < 100; ++i) s.enqueue([&order, i] { order.push_back(i); });
  const Event all = s.record();
  EXPECT_FALSE(s.reached(all)) << "steps ran before the first one was let go";
  EXPECT_TRUE(order.empty());
  gate.set_value();
  s.block(all);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(s.reached(all));
  EXPECT_TRUE(s.reached(Event{&s, 0}));
}

TEST(HostStream, WaitOrdersOneStreamAfterAnEventOfAnother) {
  HostStream a, b;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> written{0};
  a.enqueue([open, &written] {
    open.wait();
    written.store(42);
  });
  b.wait(a.record());
  int seen = -1;
  b.enqueue([&] { seen = written.load(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // b would run now without the wait
  EXPECT_FALSE(b.reached(b.record()));
  gate.set_value();
  b.synchronize();
  EXPECT_EQ(seen, 42);
}

TEST(HostStream, TheFirstFailureIsKeptUntilTakenAndLaterStepsStillRun) {
  HostStream s;
  bool ranAfter = false;
  s.enqueue([] { throw Error(cclRemoteError, "first"); });
  s.enqueue([] { throw Error(cclInvalidUsage, "second"); });
  s.enqueue([&] { ranAfter = true; });
  s.synchronize();
  EXPECT_TRUE(ranAfter);
  std::string message;
  EXPECT_EQ(s.takeError(&message), cclRemoteError);
  EXPECT_EQ(message, "first");
  EXPECT_EQ(s.takeError(&message), cclSuccess) << "taking the error clears it";
  s.enqueue([] { throw std::runtime_error("not a ccl error"); });
  s.synchronize();
  EXPECT_EQ(s.takeError(nullptr), cclInternalError);
}

TEST(HostStream, DestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    HostStream s;
    for (int i = 0; i < 50; ++i)
      s.enqueue([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ran.fetch_add(1);
      });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace ccl::coll
