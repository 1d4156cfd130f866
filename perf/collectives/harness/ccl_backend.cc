#include "harness/ccl_backend.h"

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

  std::vector<std::unique_ptr<RankComm>> connect(ProcessGroup& processes, const Options& o) override {
    const bool one_call = processes.size() == 1 && !o.parallel_init && o.timeout_s == 0;
    std::vector<cclComm_t> raw(size_t(o.nthreads), nullptr);
    if (one_call) {
      cclCheck(cclCommInitAll(raw.data(), o.nthreads, nullptr), "cclCommInitAll");
    } else {
      joinEach(processes, o, raw);
    }
    std::vector<std::unique_ptr<RankComm>> comms;
    for (cclComm_t c : raw) comms.push_back(std::make_unique<CclRankComm>(c));
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
          cclConfig_t config = CCL_CONFIG_INITIALIZER;
          if (o.timeout_s > 0) config.timeoutMs = o.timeout_s * 1000;
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

CclRankComm::~CclRankComm() {
  const cclResult_t r = cclCommDestroy(comm_);
  if (r != cclSuccess) std::fprintf(stderr, "cclCommDestroy failed: %s\n", cclGetErrorString(r));
}

void CclRankComm::groupStart() { cclCheck(cclGroupStart(), "cclGroupStart"); }
void CclRankComm::groupEnd() { cclCheck(cclGroupEnd(), "cclGroupEnd"); }

cclComm_t cclCommOf(RankComm& comm) { return static_cast<CclRankComm&>(comm).get(); }

int runCclPerf(int argc, char** argv, const PerfCollective& collective) {
  CclBackend backend;
  return perfMain(argc, argv, collective, backend);
}

}  // namespace cclperf
