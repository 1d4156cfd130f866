// SPDX-License-Identifier: BSD-3-Clause
#include "harness/runner.h"

#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "harness/memory.h"
#include "harness/report.h"
#include "harness/stall_watch.h"
#include "harness/sweep.h"
#include "harness/team.h"

namespace cclperf {
namespace {

// Runs one sweep per thread rank and returns the totals of thread 0 (every thread sees
// the same combined numbers). Rethrows the first real failure of any thread.
SweepTotals runThreads(const PerfCollective& collective, const Options& o, ProcessGroup& processes,
                       std::vector<std::unique_ptr<RankComm>>& comms) {
  const int nranks = processes.size() * o.nthreads;
  Team team(o.nthreads, processes);
  std::vector<SweepTotals> totals(size_t(o.nthreads));
  std::vector<std::exception_ptr> errors(size_t(o.nthreads));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.nthreads; ++t) {
    threads.emplace_back([&, t] {
      const RankInfo me{processes.rank() * o.nthreads + t, nranks};
      try {
        totals[size_t(t)] = runRankSweep(collective, o, *comms[size_t(t)], team, t, me, me.rank == 0);
      } catch (const TeamAborted&) {
        errors[size_t(t)] = std::current_exception();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", me.rank, e.what());
        errors[size_t(t)] = std::current_exception();
        team.abort();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::exception_ptr aborted;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const TeamAborted&) {
      aborted = e;
    }
  }
  if (aborted) std::rethrow_exception(aborted);
  return totals[0];
}

int runProgram(const PerfCollective& collective, Backend& backend, ProcessGroup& processes, const Options& o) {
  const bool root = processes.rank() == 0;
  if (root) printRunHeader(o, backend.describe());
  if (root && o.codec.active()) printCodecHeader(o);
  Memory& memory = memoryFor(o.deviceMemory);  // NoDevice before any rank starts
  const auto lines = processes.gatherText(deviceLines(processes.rank() * o.nthreads, o.nthreads, memory.name()));
  if (root) printDevices(lines);

  startStallWatch(o.stallDumpSeconds);
  auto comms = backend.connect(processes, o);
  if (root) printTableHeader(o.reportCputime != 0, o.codec.active(), o.deviceMemory);
  const SweepTotals totals = runThreads(collective, o, processes, comms);
  comms.clear();

  if (root) printSummary(totals.wrong, totals.rows ? totals.busbwSum / totals.rows : 0.0);
  return totals.wrong ? 1 : 0;
}

// -Z and --feedback are refused before any rank starts, with the usage text.
void checkCodecFits(const PerfCollective& collective, const Options& o, const char* program) {
  const CompressionShape shape = collective.compression(2);
  if (o.codec.active() && !shape.supported) {
    throw UsageError(std::string("-Z ") + o.codec.name + ": " + program +
                     " has no compressed variant (no *Ex call); use -Z none");
  }
  // Only some *Ex calls take an error-feedback handle (broadcast's and alltoall's do not):
  // elsewhere --feedback would be accepted and never applied.
  if (o.codec.feedback != cclFeedbackNone && shape.feedbackStages == 0) {
    throw UsageError(std::string("--feedback: ") + program +
                     "'s call takes no error-feedback handle (only allreduce, reduce_scatter, all_gather and "
                     "sendrecv's sends do); use --feedback none");
  }
  if (o.codec.active()) validateResolvedCodec(o);
}

}  // namespace

void Backend::prepare(Options& options) const {
  if (options.codec.requested()) throw UsageError("-Z " + options.codec.name + ": this backend has no compression");
}

int perfMain(int argc, char** argv, const PerfCollective& collective, Backend& backend) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::unique_ptr<ProcessGroup> processes;
  try {
    processes = makeProcessGroup(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  const bool root = processes->rank() == 0;
  Options o;
  try {
    o = parseOptions(argc, argv);
    if (!o.help) {
      backend.prepare(o);
      if (o.deviceMemory && !backend.takesDeviceMemory())
        throw UsageError("-M device: this backend moves host memory only");
      checkCodecFits(collective, o, argv[0]);
    }
  } catch (const UsageError& e) {
    if (root) std::fprintf(stderr, "%s\n%s", e.what(), usage(argv[0]).c_str());
    return 2;
  }
  if (o.help) {
    if (root) std::printf("%s", usage(argv[0]).c_str());
    return 0;
  }
  try {
    return runProgram(collective, backend, *processes, o);
  } catch (const NoDevice& e) {
    std::fprintf(stderr, "process %d: %s\n", processes->rank(), e.what());
    return kNoDeviceExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process %d: %s\n", processes->rank(), e.what());
    processes->abortAll();
    return 1;
  }
}

}  // namespace cclperf
