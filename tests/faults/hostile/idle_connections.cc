// SPDX-License-Identifier: BSD-3-Clause
// idle_connections HOST PORT COUNT: a helper process of the bootstrap fuzzer and its
// regression test. It opens COUNT TCP connections to HOST:PORT and sends nothing on them,
// writes how many it holds (one line) to stdout, and keeps them until its stdin closes. Held
// by another process, the connections cost the process under test only the descriptors its
// listener keeps for them, as connections from another machine would. (The callers start it
// with posix_spawn: fork() in a process whose UCX is running trips ThreadSanitizer on UCX's
// uninstrumented fork handlers.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// A non-blocking connect given 2 s; the descriptor, or -1.
int connectOnce(const sockaddr_storage& to, socklen_t len) {
  const int fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t elen = sizeof(err);
  if ((::connect(fd, reinterpret_cast<const sockaddr*>(&to), len) == 0 || errno == EINPROGRESS) &&
      ::poll(&p, 1, 2000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
    return fd;
  ::close(fd);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s HOST PORT COUNT\n", argv[0]);
    return 2;
  }
  sockaddr_storage to{};
  socklen_t len = 0;
  const int port = std::atoi(argv[2]);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&to);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&to);
  if (inet_pton(AF_INET, argv[1], &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, argv[1], &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    std::fprintf(stderr, "%s: not an address: %s\n", argv[0], argv[1]);
    return 2;
  }
  // The caller may run at a tight descriptor limit; this process needs its own.
  rlimit all{};
  getrlimit(RLIMIT_NOFILE, &all);
  all.rlim_cur = all.rlim_max;
  setrlimit(RLIMIT_NOFILE, &all);
  const int count = std::atoi(argv[3]);
  int held = 0;
  for (int i = 0; i < count; ++i) held += connectOnce(to, len) >= 0 ? 1 : 0;
  std::printf("%d\n", held);
  std::fflush(stdout);
  char b;
  while (::read(0, &b, 1) > 0) {
  }
  return 0;
}
