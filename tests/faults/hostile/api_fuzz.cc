// SPDX-License-Identifier: BSD-3-Clause
// api_fuzz: the public C API (ccl.h) driven with random arguments drawn from --seed, on 2 to
// 4 ranks as threads. Every call must return cclSuccess or a ccl error code with a message
// from cclGetLastError, never crash, never write outside its buffers (each buffer sits
// between guard bytes checked after every call; ASan checks the rest) and never outlast
// CCL_TIMEOUT + 5 s (a watchdog ends the process with a report). Calls that the header says
// must fail (a NULL or garbage communicator, an invalid type, op, root or peer, an
// overflowing count, overlapping buffers outside the in-place layout, a stream that is not a
// host stream, invalid codec parameters, group misuse) must fail and leave their buffers
// untouched; valid calls are interleaved with them and their results checked, so the
// communicator is shown still healthy after what it refused. Calls that disagree across
// ranks must fail or return on every rank in time, after which a new communicator is made,
// as a user would. One JSON line per batch of inputs on stdout.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "api_fuzz.h"

using namespace apifuzz;  // NOLINT: the fuzzer's own declarations, shared by its files

namespace {

constexpr const char* kKind = "api_fuzz";

std::atomic<uint64_t> trialNo{0};

// A step of a kind drawn from `master`: calls that need no peer on every rank, a call that
// must fail, a valid call, and steps of several ranks now and then.
void randomKindStep(World& w, Rng& master) {
  const uint64_t k = master.below(100);
  if (k < 40) {
    const uint64_t seed = master.next();
    const int calls = 24;
    w.run([&](int r) {
      Rng g(mix(seed, r));
      for (int i = 0; i < calls && !w.tainted; ++i) miscCall(g, w, r);
    });
  } else if (k < 55) {
    runStep(w, randomStep(master, w.size(), true), master);
  } else if (k < 85) {
    runStep(w, randomStep(master, w.size(), false), master);
  } else if (k < 90) {
    healthStep(w, master);
  } else if (k < 93) {
    setCompressionStep(w, master);
  } else if (k < 96) {
    splitStep(w, master);
  } else if (k < 98) {
    initStep(w, master);
  } else {
    abortStep(w, master);
  }
}

// Calls on a failed communicator are refused (destroy or abort it); then it is destroyed,
// for a new one to be made.
void retire(World& w) {
  w.run([&](int r) {
    cclResult_t a = cclSuccess;
    call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(w.comm[r], &a); });
    if (a == cclSuccess) return;
    int32_t v = 1, out = 0;
    expectRefused("cclAllReduce on a failed communicator", call("cclAllReduce", [&] {
                    return cclAllReduce(&v, &out, 1, cclInt32, cclSum, w.comm[r], nullptr);
                  }));
  });
  destroyWorld(w);
}

}  // namespace

int main(int argc, char** argv) {
  const fuzz::Options opt = fuzz::parseOptions(argc, argv, "--inputs", 2000);
  // A short deadline turns a call that waits for a peer that never comes into an error in
  // seconds; the fuzzer's refused calls log nothing unless asked for.
  setenv("CCL_TIMEOUT", "3", 0);
  setenv("CCL_DEBUG", "NONE", 0);
  seedValue = opt.seed;
  misalignBytes = opt.misalignBytes;
  const uint64_t batch = opt.batch ? opt.batch : 1000;
  const int mismatchEvery = opt.mismatchEvery ? opt.mismatchEvery : 150;
  fillGarbage(mix(opt.seed, 0xbad));

  fuzz::installCrashReport(kKind, &trialNo);
  fuzz::bindSlot(kMainSlot);
  fuzz::startWatchdog(kKind, &tally, &trialNo, std::chrono::milliseconds(1000 * (fuzz::cclTimeoutSeconds() + 5)),
                      context);

  Rng master(opt.seed);
  const auto start = fuzz::Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(fuzz::Clock::now() - start).count(); };
  uint64_t total = 0, worlds = 0, mismatches = 0;
  bool allOk = true;
  std::unique_ptr<World> world;
  int failedInits = 0;
  auto summary = [&] {
    return std::to_string(tally.inputs.load()) + " calls; " + std::to_string(worlds) + " communicators made, " +
           std::to_string(mismatches) + " mismatched calls so far; " + context();
  };
  for (uint64_t step = 1;; ++step) {
    const bool budgetLeft =
        (opt.count == 0 || total + tally.inputs < opt.count) && (opt.seconds == 0 || elapsed() < opt.seconds);
    if (!budgetLeft) break;
    stepNo = step;
    if (!world) {
      world = std::make_unique<World>(static_cast<int>(master.range(2, kMaxRanks)));
      ++worlds;
      if (!initWorld(*world, master)) {
        world.reset();
        if (++failedInits > 3) break;
        continue;
      }
    }
    World& w = *world;
    if (step % mismatchEvery == 0) {
      mismatchStep(w, master);
      ++mismatches;
    } else {
      randomKindStep(w, master);
    }
    if (w.tainted) {
      retire(w);
      world.reset();
    } else if (step % 25 == 0) {
      healthStep(w, master);
    }
    if (tally.inputs >= batch) {
      total += tally.inputs;
      allOk = fuzz::emitLine(kKind, trialNo, tally, summary()) && allOk;
      tally.reset();
      ++trialNo;
    }
  }
  if (world) destroyWorld(*world);
  world.reset();
  if (tally.inputs > 0 || trialNo == 0) {
    total += tally.inputs;
    allOk = fuzz::emitLine(kKind, trialNo, tally, summary()) && allOk;
  }
  std::fprintf(stderr, "api_fuzz: %llu calls in %.1f s (%.0f calls/s), %llu communicators, %llu mismatch steps\n",
               static_cast<unsigned long long>(total), elapsed(), static_cast<double>(total) / elapsed(),
               static_cast<unsigned long long>(worlds), static_cast<unsigned long long>(mismatches));
  return allOk ? 0 : 1;
}
