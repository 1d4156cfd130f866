// SPDX-License-Identifier: BSD-3-Clause
// The harness's element loops over the host's cores: filling and checking a 1 GiB buffer
// element by element took most of a device sweep's time (tens of seconds per rank at 1 GiB,
// where the calls take a few), on machines whose cores sat idle. Never inside a timed loop.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cclperf {

// The parts a loop over n elements takes: as many as the host's cores, at most one per
// kMinPart elements (small buffers stay on the caller's thread).
inline constexpr size_t kMinPart = size_t{1} << 20;

inline size_t partsFor(size_t n) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<size_t>(n / kMinPart, 1, cores);
}

// Calls body(part, begin, end) on `parts` disjoint ranges covering [0, n), each on a thread
// of its own (part 0 on the caller's), and returns once all have returned; the first
// exception a part threw is then rethrown.
template <class Body>
void parallelParts(size_t n, size_t parts, Body&& body) {
  const size_t per = (n + parts - 1) / parts;
  std::mutex mutex;
  std::exception_ptr failed;
  auto run = [&](size_t p) {
    try {
      body(p, std::min(n, p * per), std::min(n, (p + 1) * per));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failed) failed = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(parts - 1);
  for (size_t p = 1; p < parts; ++p) threads.emplace_back(run, p);
  run(0);
  for (std::thread& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace cclperf
