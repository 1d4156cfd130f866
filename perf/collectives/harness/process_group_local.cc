// SPDX-License-Identifier: BSD-3-Clause
// Single-process group: the build has no MPI, so ranks can only be threads (-t).
#include "harness/process_group.h"

namespace cclperf {
namespace {

class LocalProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool isMpi() const override { return false; }
  void barrier() override {}
  void broadcast(void*, size_t, int) override {}
  double allreduce(double value, Reduction) override { return value; }
  long long allreduce(long long value, Reduction) override { return value; }
  std::vector<std::string> gatherText(const std::string& text) override { return {text}; }
  void abortAll() override {}
};

}  // namespace

std::unique_ptr<ProcessGroup> makeLocalProcessGroup() { return std::make_unique<LocalProcessGroup>(); }

}  // namespace cclperf
