// SPDX-License-Identifier: BSD-3-Clause
// Helpers of the transport tests: ranks run as threads through the harness's runner
// (ccltest::runRanks), and what each rank threw is read back as a cclResult_t.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "rank_threads.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace ccl::test {

// One entry per rank: null when fn returned normally. A rank that misses the deadline fails
// the test and ends the process.
using ccltest::runRanks;

// The cclResult_t a rank failed with (cclSuccess if it did not fail), its message in *what.
inline cclResult_t codeOf(const std::exception_ptr& e, std::string* what = nullptr) {
  if (!e) return cclSuccess;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    if (what) *what = err.what();
    return err.code();
  } catch (const std::exception& err) {
    if (what) *what = err.what();
    return cclInternalError;
  }
}

// Fails the current test for every rank that threw.
inline void expectAllSucceeded(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    std::string what;
    EXPECT_EQ(codeOf(errors[r], &what), cclSuccess) << "rank " << r << ": " << what;
  }
}

inline cclUniqueId newId() {
  cclUniqueId id;
  bootstrap::createUniqueId(&id);
  return id;
}

constexpr std::chrono::milliseconds kJoinTimeout{30000};

// Waits for `req`, progressing `t`; throws ccl::Error when it does not finish in 30 s.
inline void waitFor(transport::Transport& t, transport::Request& req) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!req.test()) {
    if (!t.progress()) {
      if (std::chrono::steady_clock::now() > deadline) throw Error(cclSystemError, "test: request timed out");
      std::this_thread::yield();
    }
  }
}

}  // namespace ccl::test
