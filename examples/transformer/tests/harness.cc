// SPDX-License-Identifier: BSD-3-Clause
#include "harness.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "launch.h"

namespace gpt::harness {

const std::string& tempDir() {
  struct Dir {
    std::string path = ::testing::TempDir() + "gpt_test." + std::to_string(getpid()) + "/";
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

const std::string& corpusPath() {
  static const std::string path = [] {
    const std::string p = tempDir() + "corpus.txt";
    std::ofstream out(p, std::ios::trunc);
    for (int i = 0; i < 3000; ++i) out << "the " << (i % 7) << " lamb and the " << (i % 5) << " lion; ";
    return p;
  }();
  return path;
}

TrainResult runOn(int n, const TrainOptions& o) {
  TrainResult lead;
  std::mutex mu;
  runRanks(nullptr, nullptr, n, [&](cclComm_t comm, int rank) {
    TrainResult r = train(o, comm);
    if (rank != 0) return;
    std::lock_guard<std::mutex> g(mu);
    lead = std::move(r);
  });
  return lead;
}

double relativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return diff / scale;
}

}  // namespace gpt::harness
