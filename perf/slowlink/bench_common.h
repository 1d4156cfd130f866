// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of the slow-link allreduce benchmarks (ccl, Gloo, MPI): options, the
// deterministic inputs, the accuracy check against the exact sum, and the result line
// run.sh parses. Every rank prints its own line; run.sh takes the slowest rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace slowlink {

struct Options {
  int rank = -1;                 // -r; MPI takes it from MPI_Comm_rank
  int nranks = 0;                // -n
  std::size_t bytes = 64 << 20;  // -b: fp32 payload of one allreduce
  int iters = 3;                 // -i: timed calls
  int warmup = 1;                // -w: untimed calls before
  std::string rendezvous;        // -f: id file (ccl) or store directory (Gloo)
  std::string address;           // -a: local address to bind (Gloo)
  std::string variant = "none";  // -v: codec (ccl) or algorithm (Gloo)
  double maxRelErr = 1e-5;       // -e: the run fails if the result is further from the exact sum
  double timeoutSeconds = 120;   // -t: rendezvous wait
};

// Parses the flags above; throws std::runtime_error on anything unknown or out of range.
Options parseOptions(int argc, char** argv);

std::size_t elementCount(const Options& o);

// Rank r's input: uniform in [-1, 1), a pure function of (rank, index) so rank 0 can
// rebuild every rank's input to compute the exact sum.
void fillInput(int rank, float* data, std::size_t count);

// ||result - exact|| / ||exact|| over all elements, the exact sum taken in double.
double relativeError(const float* result, int nranks, std::size_t count);

// Times one call of `fn` between barriers so every iteration starts together.
template <typename Barrier, typename Call>
double timeCall(Barrier&& barrier, Call&& call) {
  barrier();
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prints "RESULT impl=... variant=... rank=... seconds=..." and, on rank 0, checks the
// relative error against o.maxRelErr (throws if exceeded or not finite).
// wireBytesPerCall and codecSecondsPerCall: -1 when the implementation does not say.
void reportResult(const Options& o, const std::string& impl, double meanSeconds, double wireBytesPerCall,
                  double codecSecondsPerCall, const float* result);

// Waits until `path` exists and holds `bytes` bytes, then reads them; throws after the timeout.
std::vector<char> waitForFile(const std::string& path, std::size_t bytes, double timeoutSeconds);
// Writes atomically (temporary file + rename) so readers never see a partial file.
void writeFileAtomically(const std::string& path, const void* data, std::size_t bytes);

}  // namespace slowlink
