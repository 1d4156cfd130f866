// SPDX-License-Identifier: BSD-3-Clause
// One rank of a ccl fp32 sum allreduce, started on its own (e.g. with `ip netns exec`).
// Rank 0 creates the unique id and writes it to the -f file; the other ranks wait for it.
// -v names the codec (none, fp8_e4m3, int8, int4, topk, ...), passed per call to
// cclAllReduceEx, or auto[:LIST] (CCL_CODEC=auto: the library chooses per call), with "+fb" (residual error feedback)
// or "+loco" (LoCo, beta 0.9) after it for feedback state kept across the calls; top-k keeps the library's default
// ratio (1 %). The algorithm is the library's choice (CCL_ALGO); "@name" after the variant labels it.
#include <ccl/ccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

void check(cclResult_t result, const char* what, cclComm_t comm = nullptr) {
  if (result == cclSuccess) return;
  throw std::runtime_error(std::string(what) + ": " + cclGetErrorString(result) + " (" + cclGetLastError(comm) + ")");
}

class Communicator {
 public:
  explicit Communicator(const slowlink::Options& o) {
    cclUniqueId id{};
    if (o.rank == 0) {
      check(cclGetUniqueId(&id), "cclGetUniqueId");
      slowlink::writeFileAtomically(o.rendezvous, &id, sizeof(id));
    } else {
      const std::vector<char> bytes = slowlink::waitForFile(o.rendezvous, sizeof(id), o.timeoutSeconds);
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    check(cclCommInitRank(&comm_, o.nranks, id, o.rank), "cclCommInitRank");
  }
  ~Communicator() { cclCommDestroy(comm_); }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  cclComm_t get() const { return comm_; }

 private:
  cclComm_t comm_ = nullptr;
};

cclOpStats_t allReduceStats(cclComm_t comm) {
  cclStats_t stats = CCL_STATS_INITIALIZER;
  check(cclCommGetStats(comm, &stats), "cclCommGetStats", comm);
  return stats.op[cclOpAllReduce];
}

void run(const slowlink::Options& o) {
  if (o.rendezvous.empty()) throw std::runtime_error("-f <id file> is required");
  cclCompression_t compression = CCL_COMPRESSION_INITIALIZER;
  // "@algorithm" after it only labels the row (the script sets CCL_ALGO).
  const std::string spec = o.variant.substr(0, o.variant.find('@'));
  const std::size_t plus = spec.find('+');
  const std::string codecName = spec.substr(0, plus),
                    feedbackName = plus == std::string::npos ? "" : spec.substr(plus + 1);
  // "auto" or "auto:LIST": the communicator's CCL_CODEC=auto chooses per call (set before
  // the communicator is made, which times the kernels and probes the links).
  const bool automatic = codecName.rfind("auto", 0) == 0;
  if (automatic)
    setenv("CCL_CODEC", codecName.c_str(), 1);
  else
    check(cclCodecFromName(codecName.c_str(), &compression.codec), "cclCodecFromName");
  cclFeedback_t feedback = nullptr;
  if (feedbackName == "fb")
    check(cclFeedbackCreate(&feedback, cclFeedbackResidual, 0.0f, 0), "cclFeedbackCreate");
  else if (feedbackName == "loco")
    check(cclFeedbackCreate(&feedback, cclFeedbackLoco, 0.9f, 0), "cclFeedbackCreate");
  else if (!feedbackName.empty())
    throw std::runtime_error("-v " + o.variant + ": the feedback after '+' is fb or loco");
  const std::size_t count = slowlink::elementCount(o);
  std::vector<float> send(count), recv(count);
  slowlink::fillInput(o.rank, send.data(), count);

  Communicator comm(o);
  float token = 1, tokenOut = 0;
  auto barrier = [&] { check(cclAllReduce(&token, &tokenOut, 1, cclFloat32, cclSum, comm.get(), nullptr), "barrier"); };
  auto call = [&] {
    check(cclAllReduceEx(send.data(), recv.data(), count, cclFloat32, cclSum, comm.get(), nullptr,
                         automatic ? nullptr : &compression, feedback),
          "cclAllReduceEx", comm.get());
  };
  for (int i = 0; i < o.warmup; ++i) call();
  double seconds = 0, codecSeconds = 0;
  unsigned long long wire = 0;
  for (int i = 0; i < o.iters; ++i) {
    // Count only the timed call's bytes: the barrier is an allreduce too.
    barrier();
    const cclOpStats_t before = allReduceStats(comm.get());
    seconds += slowlink::timeCall([] {}, call);
    const cclOpStats_t after = allReduceStats(comm.get());
    wire += after.wireBytes - before.wireBytes;
    codecSeconds += after.codecSeconds - before.codecSeconds;
  }
  slowlink::reportResult(o, "ccl", seconds / o.iters, double(wire) / o.iters, codecSeconds / o.iters, recv.data());
  cclFeedbackDestroy(feedback);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(slowlink::parseOptions(argc, argv));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccl_allreduce_bench: %s\n", e.what());
    return 1;
  }
}
