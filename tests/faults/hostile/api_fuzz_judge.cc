// SPDX-License-Identifier: BSD-3-Clause
// The fuzzer's shared state and the contract every call's result is judged by: a ccl code,
// and a message in cclGetLastError when it failed.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "api_fuzz.h"

namespace apifuzz {

fuzz::Tally tally;
std::atomic<uint64_t> stepNo{0};
uint64_t seedValue = 1;

std::string context() { return "step " + std::to_string(stepNo.load()) + " of --seed " + std::to_string(seedValue); }

void problem(const std::string& what) { tally.problem(context() + ": " + what); }

namespace {

// A communicator handle that is not one: the library must tell it apart by its magic, so
// it points at readable memory that holds anything but the magic.
alignas(64) unsigned char garbageComm[4096];
// A stream handle that was never made by cclHostStreamCreate (and is not a CUDA stream).
alignas(64) unsigned char fakeStreamBytes[64];

}  // namespace

cclComm_t garbage() { return reinterpret_cast<cclComm_t>(garbageComm); }
cclStream_t fakeStream() { return reinterpret_cast<cclStream_t>(fakeStreamBytes); }

void fillGarbage(uint64_t seed) {
  Rng fill(seed);
  for (auto& b : garbageComm) b = static_cast<unsigned char>(fill.next());
  for (auto& b : fakeStreamBytes) b = static_cast<unsigned char>(fill.next());
}

std::string lastError() {
  const char* m = cclGetLastError(nullptr);
  return m ? m : "(null)";
}

cclResult_t judge(const char* fn, cclResult_t rc, bool inProgressOk) {
  tally.inputs.fetch_add(1);
  const int v = static_cast<int>(rc);
  if (v < 0 || v >= cclNumResults) {
    problem(std::string(fn) + " returned " + std::to_string(v) + ", not a cclResult_t");
    return rc;
  }
  if (rc == cclSuccess || (inProgressOk && rc == cclInProgress)) {
    tally.completed.fetch_add(1);
    return rc;
  }
  tally.errors.fetch_add(1);
  const char* m = cclGetLastError(nullptr);
  if (!m || std::strncmp(m, "ccl", 3) != 0 || std::strlen(m) < 8)
    problem(std::string(fn) + " failed (" + cclGetErrorString(rc) + ") but cclGetLastError is '" + (m ? m : "NULL") +
            "'");
  return rc;
}

void judgeName(const char* fn, const char* name) {
  tally.inputs.fetch_add(1);
  tally.completed.fetch_add(1);
  if (!name || !*name) problem(std::string(fn) + " returned " + (name ? "an empty string" : "NULL"));
}

void expectRefused(const std::string& what, cclResult_t rc) {
  if (rc == cclSuccess) problem(what + " accepted an invalid argument");
}

}  // namespace apifuzz
