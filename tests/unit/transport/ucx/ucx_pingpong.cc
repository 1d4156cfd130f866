// SPDX-License-Identifier: BSD-3-Clause
// Raw UCX transport latency and bandwidth between two thread ranks of one process.
// Usage: ucx_pingpong [max_bytes] ; prints one line per message size.
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "common/error.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/ucx/ucx_transport.h"

namespace {

using Clock = std::chrono::steady_clock;
using ccl::transport::Request;
using ccl::transport::Transport;

void wait(Transport& t, Request& r) {
  while (!r.test())
    if (!t.progress()) sched_yield();
}

// Half the average round trip of `iters` ping-pongs, in microseconds.
double latencyUs(Transport& t, std::vector<char>& buf, size_t bytes, int iters) {
  const int peer = 1 - t.rank();
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (t.rank() == 0) {
      auto s = t.isend(peer, 1, buf.data(), bytes);
      auto r = t.irecv(peer, 2, buf.data(), bytes);
      wait(t, *s);
      wait(t, *r);
    } else {
      auto r = t.irecv(peer, 1, buf.data(), bytes);
      wait(t, *r);
      auto s = t.isend(peer, 2, buf.data(), bytes);
      wait(t, *s);
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters / 2;
}

// Rank 0 streams `window` messages at a time to rank 1, which acknowledges each window.
double bandwidthGBs(Transport& t, std::vector<char>& buf, size_t bytes, int iters) {
  constexpr int kWindow = 8;
  const int peer = 1 - t.rank();
  char ack = 0;
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    std::vector<std::unique_ptr<Request>> reqs;
    for (int w = 0; w < kWindow; ++w)
      reqs.push_back(t.rank() == 0 ? t.isend(peer, 3, buf.data(), bytes) : t.irecv(peer, 3, buf.data(), bytes));
    for (auto& r : reqs) wait(t, *r);
    auto a = t.rank() == 0 ? t.irecv(peer, 4, &ack, 1) : t.isend(peer, 4, &ack, 1);
    wait(t, *a);
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(bytes) * kWindow * iters / secs / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : size_t{1} << 24;
  cclUniqueId id;
  ccl::bootstrap::createUniqueId(&id);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      try {
        auto bs = ccl::bootstrap::Bootstrap::connect(id, rank, 2, std::chrono::seconds(30));
        auto t = ccl::transport::createUcxTransport(*bs);
        std::vector<char> buf(maxBytes > 0 ? maxBytes : 1, 1);
        if (rank == 0) std::printf("%12s %12s %12s\n", "bytes", "lat_us", "bw_GB/s");
        for (size_t bytes = 0; bytes <= maxBytes; bytes = bytes ? bytes * 4 : 8) {
          int iters = bytes <= 65536 ? 2000 : static_cast<int>(std::max<size_t>(20, (size_t{1} << 28) / bytes / 8));
          latencyUs(*t, buf, bytes, 10);  // warm-up
          double lat = latencyUs(*t, buf, bytes, iters);
          bs->barrier();
          double bw = bandwidthGBs(*t, buf, bytes, std::max(iters / 4, 5));
          bs->barrier();
          if (rank == 0) std::printf("%12zu %12.2f %12.3f\n", bytes, lat, bw);
        }
        bs->barrier();
      } catch (const ccl::Error& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      }
    });
  for (auto& th : threads) th.join();
  return 0;
}
