// SPDX-License-Identifier: BSD-3-Clause
// One rank of silent_host.sh: a rank whose host goes silent (its network gone: no reset, no
// end of connection, nothing) is found by the others, within CCL_PEER_SILENCE_MS and a pulse,
// and named; the survivors shrink it away and go on. A rank that is only stopped (SIGSTOP)
// for longer than that is not taken for lost: its kernel still acknowledges the pulses.
//   silent_host RANK NRANKS DIR MODE
// MODE idle: the others wait between calls (as a trainer between steps) and learn of the loss
// from cclCommGetAsyncError, then from their next call. MODE call: the others are inside an
// allreduce that the silent rank never joins, which must fail. MODE stopped: the same, but the
// last rank is stopped instead (SIGSTOP, never resumed): the call fails at CCL_TIMEOUT, naming
// it (its kernel acknowledges, its pulses stopped), and the shrink leaves it out.
// Files in DIR (a folder every rank's namespace sees): id (rank 0 writes the unique id),
// ready.R (rank R made its communicator and one call; its process id, as text), silenced (the driver's CLOCK_REALTIME
// when it cut the host off, in seconds), result.R (rank R's JSON line).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "ccl/ccl.h"

namespace {

double wallNow() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "silent_host: %s\n", what.c_str());
  std::exit(1);
}

bool readFile(const std::string& path, void* buf, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  return in.read(static_cast<char*>(buf), static_cast<std::streamsize>(bytes)) && in.gcount() == (std::streamsize)bytes;
}

void writeFile(const std::string& path, const void* buf, size_t bytes) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary).write(static_cast<const char*>(buf), static_cast<std::streamsize>(bytes));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) die("rename " + path + ": " + std::strerror(errno));
}

// One allreduce of `n` floats, every rank contributing its rank + 1; true when it gave the sum.
bool sumOk(cclComm_t comm, int n, std::string* why) {
  int rank = 0;
  cclCommUserRank(comm, &rank);
  float x = static_cast<float>(rank + 1), y = 0;
  const cclResult_t r = cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr);
  if (r != cclSuccess) {
    *why = cclGetLastError(comm);
    return false;
  }
  return y == static_cast<float>(n * (n + 1) / 2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) die("usage: silent_host RANK NRANKS DIR idle|call|stopped");
  const int rank = std::atoi(argv[1]), n = std::atoi(argv[2]);
  const std::string dir = argv[3], mode = argv[4];
  if (mode != "idle" && mode != "call" && mode != "stopped") die("MODE must be idle, call or stopped");
  const int silent = n - 1;  // the rank whose host the driver cuts off

  cclUniqueId id{};
  if (rank == 0) {
    if (cclGetUniqueId(&id) != cclSuccess) die("cclGetUniqueId failed");
    writeFile(dir + "/id", &id, sizeof id);
  } else {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!readFile(dir + "/id", &id, sizeof id))
      if (std::chrono::steady_clock::now() > until)
        die("no id from rank 0");
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  cclComm_t comm = nullptr;
  if (cclCommInitRank(&comm, n, id, rank) != cclSuccess) die("cclCommInitRank failed");
  std::string why;
  if (!sumOk(comm, n, &why)) die("the first allreduce failed: " + why);
  const std::string pid = std::to_string(getpid());
  writeFile(dir + "/ready." + std::to_string(rank), pid.data(), pid.size());

  if (rank == silent) {  // cut off, then killed by the driver
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }

  double silencedAt = 0, errorAt = 0;
  bool earlyError = false;
  std::string message;
  if (mode == "stopped") {  // into the call once the last rank is stopped: CCL_TIMEOUT counts from here
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!readFile(dir + "/silenced", &silencedAt, sizeof silencedAt) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (mode != "idle") {  // blocked until the loss is found, or CCL_TIMEOUT (stopped)
    float x = 1, y = 0;
    if (cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr) != cclSuccess) {
      errorAt = wallNow();
      message = cclGetLastError(comm);
      earlyError = !readFile(dir + "/silenced", &silencedAt, sizeof silencedAt);
    }
  }
  // Idle between calls, as a trainer between steps: only the watcher can find the loss.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (mode == "idle") {
    cclResult_t async = cclSuccess;
    cclCommGetAsyncError(comm, &async);
    const bool silenced = silencedAt > 0 || readFile(dir + "/silenced", &silencedAt, sizeof silencedAt);
    if (async != cclSuccess) {
      errorAt = wallNow();
      earlyError = !silenced;  // lost while it was only stopped (or before anything happened)
      break;
    }
    if (std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // The next call fails and names the lost rank.
  const bool found = errorAt > 0;
  if (found && mode == "idle") {
    float x = 1, y = 0;
    if (cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr) != cclSuccess) message = cclGetLastError(comm);
  }
  const std::string who = "rank " + std::to_string(silent);
  const bool named = message.find(who + " is gone") != std::string::npos ||
                     message.find(who + " sends no pulses") != std::string::npos;
  // The survivors agree on who is alive (the silent host's listener does not answer) and go on.
  int shrunkTo = 0;
  bool after = false;
  if (found) {
    cclComm_t next = nullptr;
    if (cclCommShrink(comm, nullptr, 0, &next, nullptr, CCL_SHRINK_ALIVE | CCL_SHRINK_ABORT) == cclSuccess) {
      cclCommCount(next, &shrunkTo);
      after = sumOk(next, shrunkTo, &why);
      cclCommDestroy(next);
    } else {
      why = cclGetLastError(nullptr);
    }
  } else {
    cclCommAbort(comm);
  }
  const double detected = found && silencedAt > 0 ? errorAt - silencedAt : -1;  // -1: not found
  char line[1024];
  std::snprintf(line, sizeof line,
                "{\"mode\": \"%s\", \"rank\": %d, \"found\": %s, \"early\": %s, \"detected_s\": %.3f, \"named\": %s, "
                "\"shrunk_to\": %d, "
                "\"after_ok\": %s}\n",
                mode.c_str(), rank, found ? "true" : "false", earlyError ? "true" : "false", detected,
                named ? "true" : "false", shrunkTo, after ? "true" : "false");
  writeFile(dir + "/result." + std::to_string(rank), line, std::strlen(line));
  std::fputs(line, stdout);
  if (!named && found) std::fprintf(stderr, "silent_host: rank %d: the call's error: %s\n", rank, message.c_str());
  if (found && !after) std::fprintf(stderr, "silent_host: rank %d: after the shrink: %s\n", rank, why.c_str());
  return 0;
}
