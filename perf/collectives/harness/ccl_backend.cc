// SPDX-License-Identifier: BSD-3-Clause
#include "harness/ccl_backend.h"

#include "harness/memory.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace cclperf {
namespace {

class CclBackend final : public Backend {
 public:
  std::string describe() const override {
    int version = 0;
    cclCheck(cclGetVersion(&version), "cclGetVersion");
    return "ccl library version " + std::to_string(version) + ", header " + std::to_string(CCL_VERSION_CODE);
  }

  void prepare(Options& o) const override {
    cclCodec_t codec = cclCodecNone;
    if (cclCodecFromName(o.codec.name.c_str(), &codec) != cclSuccess) {
      throw UsageError("-Z: unknown codec '" + o.codec.name + "' (" + codecNames() + ")");
    }
    o.codec.codec = codec;
  }

  bool takesDeviceMemory() const override { return true; }

  std::vector<std::unique_ptr<RankComm>> connect(ProcessGroup& processes, const Options& o) override {
    const bool oneCall = processes.size() == 1 && !o.parallelInit && o.timeoutSeconds == 0;
    std::vector<cclComm_t> raw(size_t(o.nthreads), nullptr);
    if (oneCall) {
      // With -M device, rank t on the device deviceOfThread gives (NCCL's devlist).
      Memory& m = memoryFor(o.deviceMemory);
      std::vector<int> devices(size_t(o.nthreads));
      for (int t = 0; t < o.nthreads; ++t) devices[size_t(t)] = deviceOfThread(m, processes.rank(), o.nthreads, t);
      cclCheck(cclCommInitAll(raw.data(), o.nthreads, devices.data()), "cclCommInitAll");
    } else {
      joinEach(processes, o, raw);
    }
    std::vector<std::unique_ptr<RankComm>> comms;
    std::exception_ptr failed;
    for (cclComm_t c : raw) {
      // Each communicator is owned as soon as it is wrapped, so a failure frees them all.
      try {
        comms.push_back(std::make_unique<CclRankComm>(c, o.codec, o.aggIters));
      } catch (const std::exception&) {
        if (!failed) failed = std::current_exception();
        cclCommDestroy(c);
      }
    }
    if (failed) std::rethrow_exception(failed);
    return comms;
  }

 private:
  // Every thread rank joins with cclCommInitRank, concurrently since the call blocks
  // until all ranks of the run have joined.
  static void joinEach(ProcessGroup& processes, const Options& o, std::vector<cclComm_t>& raw) {
    cclUniqueId id{};
    if (processes.rank() == 0) cclCheck(cclGetUniqueId(&id), "cclGetUniqueId");
    processes.broadcast(&id, sizeof(id), 0);
    const int nranks = processes.size() * o.nthreads;
    std::vector<std::exception_ptr> errors(raw.size());
    std::vector<std::thread> threads;
    for (int t = 0; t < o.nthreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          Memory& m = memoryFor(o.deviceMemory);
          m.bind(deviceOfThread(m, processes.rank(), o.nthreads, t));  // the communicator's device
          cclConfig_t config = CCL_CONFIG_INITIALIZER;
          if (o.timeoutSeconds > 0) config.timeoutMs = o.timeoutSeconds * 1000;
          const int rank = processes.rank() * o.nthreads + t;
          cclCheck(cclCommInitRankConfig(&raw[size_t(t)], nranks, id, rank, &config), "cclCommInitRankConfig");
        } catch (const std::exception&) {
          errors[size_t(t)] = std::current_exception();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (size_t t = 0; t < raw.size(); ++t) {
      if (errors[t]) {
        for (cclComm_t c : raw) {
          if (c) cclCommDestroy(c);
        }
        std::rethrow_exception(errors[t]);
      }
    }
  }
};

}  // namespace

void cclCheck(cclResult_t result, const char* call, cclComm_t comm) {
  if (result == cclSuccess) return;
  throw std::runtime_error(std::string(call) + " failed: " + cclGetErrorString(result) + ": " + cclGetLastError(comm));
}

CclRankComm::CclRankComm(cclComm_t comm, const CodecOptions& z, int callsPerGroup)
    : comm_(comm), compressed_(z.active()), compression_(compressionFrom(z)) {
  if (!compressed_ || z.feedback == cclFeedbackNone) return;
  // The caller destroys the communicator if this throws; the handles made so far are ours.
  try {
    for (int i = 0; i < std::max(callsPerGroup, 1); ++i) {
      cclFeedback_t f = nullptr;
      cclCheck(cclFeedbackCreate(&f, z.feedback, z.locoBeta, z.locoReset), "cclFeedbackCreate");
      feedback_.push_back(f);
    }
  } catch (...) {
    for (cclFeedback_t f : feedback_) cclFeedbackDestroy(f);
    throw;
  }
}

CclRankComm::~CclRankComm() {
  for (cclFeedback_t f : feedback_) cclFeedbackDestroy(f);
  const cclResult_t r = cclCommDestroy(comm_);
  if (r != cclSuccess) std::fprintf(stderr, "cclCommDestroy failed: %s\n", cclGetErrorString(r));
}

cclFeedback_t CclRankComm::nextFeedback() {
  if (feedback_.empty()) return nullptr;
  if (!inGroup_) return feedback_.front();
  if (nextInGroup_ >= feedback_.size()) {
    throw std::logic_error("more calls in a group than the -m feedback handles made for it");
  }
  return feedback_[nextInGroup_++];
}

void CclRankComm::groupStart() {
  cclCheck(cclGroupStart(), "cclGroupStart");
  inGroup_ = true;
  nextInGroup_ = 0;
}
void CclRankComm::groupEnd() {
  // Out of the group whatever cclGroupEnd returns: the thread is no longer inside it.
  inGroup_ = false;
  cclCheck(cclGroupEnd(), "cclGroupEnd");
}

bool CclRankComm::wireCounters(double* raw, double* wire) {
  cclStats_t stats = CCL_STATS_INITIALIZER;
  cclCheck(cclCommGetStats(comm_, &stats), "cclCommGetStats", comm_);
  // Only the measured collective runs between two reads, so every kind can be summed.
  double r = 0, w = 0;
  for (const cclOpStats_t& op : stats.op) {
    r += double(op.rawBytes);
    w += double(op.wireBytes);
  }
  *raw = r;
  *wire = w;
  return true;
}

bool CclRankComm::commandCounters(double* commands, double* hostFunctions) {
  cclStats_t stats = CCL_STATS_INITIALIZER;
  cclCheck(cclCommGetStats(comm_, &stats), "cclCommGetStats", comm_);
  *commands = double(stats.deviceCommands);
  *hostFunctions = double(stats.deviceHostFunctions);
  return true;
}

CclRankComm& cclRankOf(RankComm& comm) { return static_cast<CclRankComm&>(comm); }
cclComm_t cclCommOf(RankComm& comm) { return cclRankOf(comm).get(); }

int runCclPerf(int argc, char** argv, const PerfCollective& collective) {
  CclBackend backend;
  return perfMain(argc, argv, collective, backend);
}

}  // namespace cclperf
