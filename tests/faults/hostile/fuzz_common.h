// SPDX-License-Identifier: BSD-3-Clause
// What the hostile-input fuzzers share: a seeded random generator, the command line, the
// per-line tally printed as one JSON object (the fault campaign's line format), and a
// watchdog that ends the process with a report when a call outlives CCL_TIMEOUT + 5 s. A
// hang cannot be recovered from in-process (the stuck thread may still write to its
// buffers), so the watchdog prints the line itself and exits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

namespace fuzz {

using Clock = std::chrono::steady_clock;

// splitmix64: small, fast, and the same sequence on every platform for a given seed.
inline uint64_t mix(uint64_t a, uint64_t b = 0) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_++); }
  // Uniform in [0, n); 0 when n is 0.
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1)); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }

 private:
  uint64_t state_;
};

struct Options {
  uint64_t count = 0;     // --inputs (api_fuzz) or --trials (bootstrap_fuzz); 0: not given
  double seconds = 0;     // --seconds; 0: not given
  uint64_t seed = 1;      // --seed
  uint64_t batch = 0;     // --batch: inputs per output line (api_fuzz); 0: the program's default
  int mismatchEvery = 0;  // --mismatch-every: steps between calls mismatched across ranks; 0: default
  // --misalign elements (default): buffers start whole elements off any vector alignment;
  // --misalign bytes: at any byte, also inside an element (api_fuzz_calls.cc, misalignUnit).
  bool misalignBytes = false;
};

// Parses argv; `countFlag` is "--inputs" or "--trials". Exits with a usage line on error.
Options parseOptions(int argc, char** argv, const char* countFlag, uint64_t defaultCount);

// The counters of one output line.
struct Tally {
  std::atomic<uint64_t> inputs{0}, errors{0}, completed{0}, hangs{0}, wrong{0}, crashes{0};
  std::mutex mutex;
  std::string detail;  // the first problem of the line, else a summary

  // Counts a problem (a wrong result, a guard byte hit, a broken contract) and keeps the
  // first description for the line's detail.
  void problem(const std::string& what);
  bool ok() const { return hangs == 0 && wrong == 0 && crashes == 0; }
  void reset();
};

// Prints the line of `trial` from `t` on stdout (one JSON object, flushed). `summary` is the
// detail when no problem was recorded. Thread-safe. Returns whether the line was ok.
bool emitLine(const char* kind, uint64_t trial, Tally& t, const std::string& summary);

// Escapes `s` for a JSON string (quotes, backslashes, control characters).
std::string jsonEscape(const std::string& s);

// CCL_TIMEOUT as the library reads it (seconds), after the fuzzer has set its default.
int cclTimeoutSeconds();

// One watched thread: `since` is when its current call began (0: not in a call).
struct WatchSlot {
  std::atomic<int64_t> since{0};
  std::atomic<const char*> what{nullptr};
};

// Starts the watchdog thread for `kind`: every 100 ms it looks at every slot, and when one
// has been in its call for more than `limit` it prints a failed line (hangs: 1) for the
// current trial of `tally` and exits the process with status 1. `context` (optional) adds
// the fuzzer's position (step, seed) to the report.
void startWatchdog(const char* kind, Tally* tally, std::atomic<uint64_t>* trial, std::chrono::milliseconds limit,
                   std::string (*context)());
// The slot of the calling thread; slots are reused by index (0 .. kSlots-1).
constexpr int kSlots = 64;
WatchSlot& slot(int index);
void bindSlot(int index);  // the calling thread reports through slot(index)
WatchSlot* boundSlot();    // nullptr when the thread has none

// Marks the calling thread as inside `what` until destroyed.
class InCall {
 public:
  explicit InCall(const char* what);
  ~InCall();
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;

 private:
  WatchSlot* slot_;
};

// The TCP ports this process listens on (IPv4 and IPv6), from its own descriptors: how a
// fuzzer in the same process finds a rank's ring port, which the unique id does not hold
// (an attacker would scan for it).
std::set<int> listeningPorts();

// The idle_connections helper (idle_connections.cc: its path is `helper`), started with
// posix_spawn, holding `count` silent connections to host:port until this is destroyed.
class IdleProcess {
 public:
  IdleProcess(const std::string& helper, const std::string& host, int port, int count);
  ~IdleProcess();
  IdleProcess(const IdleProcess&) = delete;
  IdleProcess& operator=(const IdleProcess&) = delete;
  int held() const { return held_; }  // connections it holds (0 if it did not start)

 private:
  int pid_ = -1;
  int toChild_ = -1;  // its stdin: closing it lets the helper go
  int held_ = 0;
};

// Outside sanitizer builds, a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints a
// failed line (crashes: 1) for the current trial before the process dies; sanitizer builds
// keep their own reports.
void installCrashReport(const char* kind, std::atomic<uint64_t>* trial);

}  // namespace fuzz
