// SPDX-License-Identifier: BSD-3-Clause
// Ranks as processes without MPI: `-np N` forks N processes before anything else runs (no
// CUDA context, no communicator exists yet, so each child makes its own, as production runs
// one rank per process). The parent stays behind as a hub: it serves the harness's few
// host-side operations over a socket pair per child (every child sends its part of an
// operation, the hub answers each once all have), and when a child fails or dies it stops
// the others, so no rank waits for ever. The parent never runs the benchmark; it exits with
// the children's status.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/process_group.h"

namespace cclperf {
namespace {

enum class Op : uint32_t {
  kBarrier,
  kBroadcast,
  kSumDouble,
  kMinDouble,
  kMaxDouble,
  kSumLong,
  kMinLong,
  kMaxLong,
  kGatherText,
  kAbort
};

struct Header {
  Op op;
  int32_t root;
  uint64_t bytes;
};

bool writeAll(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool sendMessage(int fd, Op op, int root, const std::string& payload) {
  const Header h{op, root, payload.size()};
  return writeAll(fd, &h, sizeof h) && writeAll(fd, payload.data(), payload.size());
}

bool recvMessage(int fd, Header* h, std::string* payload) {
  if (!readAll(fd, h, sizeof *h)) return false;
  payload->resize(h->bytes);
  return readAll(fd, payload->data(), payload->size());
}

template <class T>
std::string bytesOf(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T valueOf(const std::string& s) {
  T v{};
  std::memcpy(&v, s.data(), std::min(sizeof v, s.size()));
  return v;
}

// A child: each operation is one message to the hub and one answer.
class ForkedChild final : public ProcessGroup {
 public:
  ForkedChild(int rank, int size, int fd) : rank_(rank), size_(size), fd_(fd) {}
  ~ForkedChild() override { ::close(fd_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool isMpi() const override { return false; }
  void barrier() override { exchange(Op::kBarrier, 0, {}); }
  void broadcast(void* data, size_t bytes, int root) override {
    const std::string got = exchange(
        Op::kBroadcast, root, rank_ == root ? std::string(static_cast<const char*>(data), bytes) : std::string());
    if (got.size() != bytes) throw std::runtime_error("-np: broadcast of a different size");
    std::memcpy(data, got.data(), bytes);
  }
  double allreduce(double value, Reduction op) override {
    const Op o = op == Reduction::kSum ? Op::kSumDouble : op == Reduction::kMin ? Op::kMinDouble : Op::kMaxDouble;
    return valueOf<double>(exchange(o, 0, bytesOf(value)));
  }
  long long allreduce(long long value, Reduction op) override {
    const Op o = op == Reduction::kSum ? Op::kSumLong : op == Reduction::kMin ? Op::kMinLong : Op::kMaxLong;
    return valueOf<long long>(exchange(o, 0, bytesOf(value)));
  }
  std::vector<std::string> gatherText(const std::string& text) override {
    const std::string all = exchange(Op::kGatherText, 0, text);
    std::vector<std::string> out;
    for (size_t at = 0; rank_ == 0 && at + 8 <= all.size();) {
      const auto n = valueOf<uint64_t>(all.substr(at, 8));
      out.push_back(all.substr(at + 8, n));
      at += 8 + n;
    }
    return out;
  }
  void abortAll() override { sendMessage(fd_, Op::kAbort, 0, {}); }

 private:
  std::string exchange(Op op, int root, const std::string& payload) {
    Header h{};
    std::string reply;
    if (!sendMessage(fd_, op, root, payload) || !recvMessage(fd_, &h, &reply)) {
      std::fprintf(stderr, "process %d: the -np hub is gone (another rank failed)\n", rank_);
      std::_Exit(1);
    }
    return reply;
  }

  int rank_, size_, fd_;
};

// The hub's answer to one round, every child's message in hand.
std::vector<std::string> answer(const std::vector<Header>& hs, const std::vector<std::string>& in) {
  const size_t n = hs.size();
  std::vector<std::string> out(n);
  const Op op = hs[0].op;
  switch (op) {
    case Op::kBarrier:
      break;
    case Op::kBroadcast: {
      const auto root = static_cast<size_t>(std::clamp<int>(hs[0].root, 0, int(n) - 1));
      for (auto& o : out) o = in[root];
      break;
    }
    case Op::kSumDouble:
    case Op::kMinDouble:
    case Op::kMaxDouble: {
      double r = valueOf<double>(in[0]);
      for (size_t i = 1; i < n; ++i) {
        const double v = valueOf<double>(in[i]);
        r = op == Op::kSumDouble ? r + v : op == Op::kMinDouble ? std::min(r, v) : std::max(r, v);
      }
      for (auto& o : out) o = bytesOf(r);
      break;
    }
    case Op::kSumLong:
    case Op::kMinLong:
    case Op::kMaxLong: {
      long long r = valueOf<long long>(in[0]);
      for (size_t i = 1; i < n; ++i) {
        const long long v = valueOf<long long>(in[i]);
        r = op == Op::kSumLong ? r + v : op == Op::kMinLong ? std::min(r, v) : std::max(r, v);
      }
      for (auto& o : out) o = bytesOf(r);
      break;
    }
    case Op::kGatherText:
      for (size_t i = 0; i < n; ++i) out[0] += bytesOf(uint64_t(in[i].size())) + in[i];
      break;
    case Op::kAbort:
      break;
  }
  return out;
}

// The parent: serves rounds until every child has closed its socket, then reaps them.
[[noreturn]] void runHub(std::vector<pid_t> pids, std::vector<int> fds) {
  const size_t n = pids.size();
  std::vector<Header> hs(n);
  std::vector<std::string> in(n);
  std::vector<char> has(n, 0), closed(n, 0);
  bool failed = false;
  auto stopAll = [&] {
    for (pid_t p : pids) ::kill(p, SIGKILL);
  };
  for (size_t open = n; open > 0 && !failed;) {
    std::vector<pollfd> pfds;
    for (size_t i = 0; i < n; ++i)
      if (!closed[i] && !has[i]) pfds.push_back({fds[i], POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) break;
    for (const pollfd& p : pfds) {
      if (!p.revents) continue;
      const size_t i = static_cast<size_t>(std::find(fds.begin(), fds.end(), p.fd) - fds.begin());
      if (!recvMessage(fds[i], &hs[i], &in[i])) {
        closed[i] = 1;
        --open;
        // A child that leaves while others wait in a round has failed, or returned early.
        if (std::any_of(has.begin(), has.end(), [](char c) { return c; })) failed = true;
        continue;
      }
      if (hs[i].op == Op::kAbort) failed = true;
      has[i] = 1;
    }
    const bool round = std::all_of(has.begin(), has.end(), [](char c) { return c; });
    if (round) {
      if (std::any_of(hs.begin(), hs.end(), [&](const Header& h) { return h.op != hs[0].op; })) failed = true;
      if (failed) break;
      const std::vector<std::string> out = answer(hs, in);
      for (size_t i = 0; i < n; ++i) sendMessage(fds[i], hs[i].op, 0, out[i]);
      std::fill(has.begin(), has.end(), 0);
    } else if (open < n && std::any_of(has.begin(), has.end(), [](char c) { return c; })) {
      failed = true;  // a round that can no longer complete
    }
  }
  if (failed) stopAll();
  int worst = 0;
  for (pid_t p : pids) {
    int status = 0;
    while (::waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && (worst == 0 || worst == 77)) worst = code;  // 77 (no device) only if nothing worse
  }
  std::exit(failed && worst == 0 ? 1 : worst);
}

}  // namespace

std::unique_ptr<ProcessGroup> forkedProcessGroupIfAsked(int* argc, char*** argv) {
  int nprocs = 0;
  for (int i = 1; i + 1 < *argc; ++i) {
    if (std::strcmp((*argv)[i], "-np") != 0 && std::strcmp((*argv)[i], "--nprocs") != 0) continue;
    nprocs = std::atoi((*argv)[i + 1]);
    if (nprocs < 1) throw std::runtime_error("-np: the number of processes must be at least 1");
    for (int j = i; j + 2 <= *argc; ++j) (*argv)[j] = (*argv)[j + 2];  // the other flags never see it
    *argc -= 2;
    break;
  }
  if (nprocs == 0) return nullptr;
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < nprocs; ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("-np: socketpair");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("-np: fork");
    if (pid == 0) {
      for (int fd : fds) ::close(fd);
      ::close(sv[0]);
      return std::make_unique<ForkedChild>(r, nprocs, sv[1]);
    }
    ::close(sv[1]);
    pids.push_back(pid);
    fds.push_back(sv[0]);
  }
  runHub(std::move(pids), std::move(fds));
}

}  // namespace cclperf
