// SPDX-License-Identifier: BSD-3-Clause
// One shard of a test matrix. The main build runs every matrix whole; a build that repeats the
// matrices for another reason (ASan, TSan without UCX) runs one shard each, a different one
// per build (CCL_TEST_SHARD=INDEX/COUNT, set on the test by ccl_test_matrix in
// tests/CMakeLists.txt). A matrix is thousands of variations of the same code paths: a third
// of them under a sanitizer still runs every path.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ccltest {

class Shard {
 public:
  // The shard this process runs: CCL_TEST_SHARD, or the whole matrix when it is unset.
  static Shard fromEnv() {
    Shard s;
    if (const char* v = std::getenv("CCL_TEST_SHARD"); v && *v) {
      unsigned index = 0, count = 0;
      if (std::sscanf(v, "%u/%u", &index, &count) != 2 || count == 0 || index >= count) {
        std::fprintf(stderr, "CCL_TEST_SHARD=%s: expected INDEX/COUNT with INDEX < COUNT\n", v);
        std::abort();
      }
      s.index_ = index;
      s.count_ = count;
    }
    return s;
  }

  // Whether the next case of a loop belongs to this shard (call it once per case, in the same
  // order on every build).
  bool next() { return seen_++ % count_ == index_; }

  // How many shards the matrix is cut into (1: this process runs all of it).
  size_t count() const { return count_; }

  // The cases of a parameterised matrix that belong to this shard (never none: a suite
  // without an instance fails googletest's check).
  template <typename T>
  std::vector<T> of(const std::vector<T>& all) {
    std::vector<T> kept;
    for (const T& c : all)
      if (next()) kept.push_back(c);
    if (kept.empty() && !all.empty()) kept.push_back(all.front());
    return kept;
  }

 private:
  size_t index_ = 0, count_ = 1, seen_ = 0;
};

}  // namespace ccltest
