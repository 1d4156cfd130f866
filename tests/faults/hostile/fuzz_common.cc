// SPDX-License-Identifier: BSD-3-Clause
// The command line, output lines, watchdog and crash report shared by the hostile-input
// fuzzers (fuzz_common.h).
#include "fuzz_common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FUZZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FUZZ_SANITIZED 1
#endif
#endif

namespace fuzz {
namespace {

std::mutex outputMutex;

[[noreturn]] void usage(const char* argv0, const char* countFlag, const char* why) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s [%s N] [--seconds T] [--seed S] [--batch N] [--mismatch-every N] "
               "[--misalign elements|bytes]\n",
               argv0, why, argv0, countFlag);
  std::exit(2);
}

uint64_t parseUnsigned(const char* argv0, const char* countFlag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 0);
  if (errno || !end || *end || text[0] == '-') usage(argv0, countFlag, "not a number");
  return v;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

WatchSlot slots[kSlots];
thread_local WatchSlot* tlsSlot = nullptr;

}  // namespace

Options parseOptions(int argc, char** argv, const char* countFlag, uint64_t defaultCount) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(argv[0], countFlag, ("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == countFlag) {
      o.count = parseUnsigned(argv[0], countFlag, v);
    } else if (a == "--seconds") {
      char* end = nullptr;
      o.seconds = std::strtod(v, &end);
      if (!end || *end || !(o.seconds > 0)) usage(argv[0], countFlag, "--seconds takes a positive number");
    } else if (a == "--seed") {
      o.seed = parseUnsigned(argv[0], countFlag, v);
    } else if (a == "--batch") {
      o.batch = parseUnsigned(argv[0], countFlag, v);
    } else if (a == "--misalign") {
      const std::string m = v;
      if (m != "bytes" && m != "elements") usage(argv[0], countFlag, "--misalign takes bytes or elements");
      o.misalignBytes = m == "bytes";
    } else if (a == "--mismatch-every") {
      o.mismatchEvery = static_cast<int>(parseUnsigned(argv[0], countFlag, v));
    } else {
      usage(argv[0], countFlag, ("unknown option " + a).c_str());
    }
  }
  if (o.count == 0 && o.seconds == 0) o.count = defaultCount;
  return o;
}

void Tally::problem(const std::string& what) {
  wrong.fetch_add(1);
  std::lock_guard<std::mutex> lock(mutex);
  if (detail.empty()) detail = what;
  std::fprintf(stderr, "PROBLEM: %s\n", what.c_str());
}

void Tally::reset() {
  inputs = 0, errors = 0, completed = 0, hangs = 0, wrong = 0, crashes = 0;
  std::lock_guard<std::mutex> lock(mutex);
  detail.clear();
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

bool emitLine(const char* kind, uint64_t trial, Tally& t, const std::string& summary) {
  std::string detail;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    detail = t.detail.empty() ? summary : t.detail;
  }
  const bool ok = t.ok();
  std::lock_guard<std::mutex> lock(outputMutex);
  std::printf(
      "{\"kind\": \"%s\", \"trial\": %llu, \"ok\": %s, \"survivors\": 0, \"errors\": %llu, \"completed\": %llu, "
      "\"hangs\": %llu, \"wrong\": %llu, \"crashes\": %llu, \"t_error\": [], \"inputs\": %llu, \"detail\": \"%s\"}\n",
      kind, static_cast<unsigned long long>(trial), ok ? "true" : "false",
      static_cast<unsigned long long>(t.errors.load()), static_cast<unsigned long long>(t.completed.load()),
      static_cast<unsigned long long>(t.hangs.load()), static_cast<unsigned long long>(t.wrong.load()),
      static_cast<unsigned long long>(t.crashes.load()), static_cast<unsigned long long>(t.inputs.load()),
      jsonEscape(detail).c_str());
  std::fflush(stdout);
  return ok;
}

int cclTimeoutSeconds() {
  const char* v = std::getenv("CCL_TIMEOUT");
  const int s = v && *v ? std::atoi(v) : 300;
  return s > 0 ? s : 300;
}

WatchSlot& slot(int index) { return slots[index]; }
void bindSlot(int index) { tlsSlot = &slots[index]; }
WatchSlot* boundSlot() { return tlsSlot; }

InCall::InCall(const char* what) : slot_(tlsSlot) {
  if (!slot_) return;
  slot_->what.store(what);
  slot_->since.store(nowNs());
}

InCall::~InCall() {
  if (slot_) slot_->since.store(0);
}

void startWatchdog(const char* kind, Tally* tally, std::atomic<uint64_t>* trial, std::chrono::milliseconds limit,
                   std::string (*context)()) {
  std::thread([=] {
    const int64_t limitNs = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t now = nowNs();
      for (int i = 0; i < kSlots; ++i) {
        const int64_t since = slots[i].since.load();
        if (since == 0 || now - since <= limitNs) continue;
        const char* what = slots[i].what.load();
        tally->hangs.fetch_add(1);
        {
          std::lock_guard<std::mutex> lock(tally->mutex);
          tally->detail = std::string(what ? what : "a call") + " on thread " + std::to_string(i) +
                          " did not return within " + std::to_string(limit.count() / 1000) + " s (CCL_TIMEOUT + 5 s)" +
                          (context ? "; " + context() : std::string());
        }
        emitLine(kind, trial->load(), *tally, "");
        std::fprintf(stderr, "HANG: %s\n", tally->detail.c_str());
        std::fflush(stderr);
        _exit(1);
      }
    }
  }).detach();
}

std::set<int> listeningPorts() {
  std::set<int> ports;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return ports;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    int listening = 0, type = 0;
    socklen_t len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage ss{};
    len = sizeof(ss);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    if (ss.ss_family == AF_INET) ports.insert(ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port));
    if (ss.ss_family == AF_INET6) ports.insert(ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port));
  }
  closedir(d);
  return ports;
}

IdleProcess::IdleProcess(const std::string& helper, const std::string& host, int port, int count) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::string portText = std::to_string(port), countText = std::to_string(count), path = helper, where = host;
  char* args[] = {path.data(), where.data(), portText.data(), countText.data(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, path.c_str(), &actions, nullptr, args, environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  pid_ = pid;
  toChild_ = in[1];
  if (pid_ > 0) {
    // One line: how many connections it holds, once it has made them all.
    char line[32] = {};
    size_t got = 0;
    pollfd p{out[0], POLLIN, 0};
    while (got + 1 < sizeof(line) && ::poll(&p, 1, 60000) == 1) {
      const ssize_t n = ::read(out[0], line + got, sizeof(line) - 1 - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      if (std::memchr(line, '\n', got)) break;
    }
    held_ = std::atoi(line);
  }
  close(out[0]);
}

IdleProcess::~IdleProcess() {
  if (toChild_ >= 0) close(toChild_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
}

#ifndef FUZZ_SANITIZED
namespace {

const char* crashKind = "";
std::atomic<uint64_t>* crashTrial = nullptr;

void writeAll(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(1, s, n);
    if (w <= 0) return;
    s += w, n -= static_cast<size_t>(w);
  }
}

// Async-signal-safe: formats with write() only.
void onCrash(int sig) {
  char num[24];
  uint64_t t = crashTrial ? crashTrial->load() : 0;
  int i = sizeof(num) - 1;
  num[i] = '\0';
  do num[--i] = static_cast<char>('0' + t % 10);
  while ((t /= 10) != 0 && i > 0);
  writeAll("{\"kind\": \"");
  writeAll(crashKind);
  writeAll("\", \"trial\": ");
  writeAll(num + i);
  writeAll(
      ", \"ok\": false, \"survivors\": 0, \"errors\": 0, \"completed\": 0, \"hangs\": 0, \"wrong\": 0, \"crashes\": 1, "
      "\"t_error\": [], \"inputs\": 0, \"detail\": \"died of signal ");
  writeAll(sig == SIGSEGV  ? "SIGSEGV"
           : sig == SIGBUS ? "SIGBUS"
           : sig == SIGFPE ? "SIGFPE"
           : sig == SIGILL ? "SIGILL"
                           : "SIGABRT");
  writeAll("\"}\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace
#endif

void installCrashReport(const char* kind, std::atomic<uint64_t>* trial) {
#ifndef FUZZ_SANITIZED
  crashKind = kind;
  crashTrial = trial;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, onCrash);
#else
  (void)kind;
  (void)trial;
#endif
}

}  // namespace fuzz
