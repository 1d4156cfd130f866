// SPDX-License-Identifier: BSD-3-Clause
// TCP sockets for the bootstrap: RAII file descriptors whose every wait has a deadline.
// All I/O handles EINTR and partial transfers and never raises SIGPIPE. shutdown() may be
// called from another thread to make a blocked wait fail promptly.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccl::bootstrap {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A socket address small enough to travel inside a cclUniqueId and in bootstrap messages.
// Fields are in network byte order as they come from sockaddr_in/sockaddr_in6.
struct WireAddr {
  uint16_t family;  // AF_INET or AF_INET6 (host order)
  uint16_t port;
  uint32_t scopeId;  // IPv6 scope (link-local addresses); 0 otherwise
  uint8_t addr[16];
};
static_assert(sizeof(WireAddr) == 24);

// Converts to a sockaddr; throws Error(cclInvalidArgument) for an unknown family.
socklen_t toSockaddr(const WireAddr& w, sockaddr_storage* out);
std::string toString(const WireAddr& w);

// The address the bootstrap binds to: CCL_SOCKET_IFNAME if set, else the first up
// non-loopback interface with an address of CCL_SOCKET_FAMILY, else loopback. Port 0.
WireAddr pickLocalAddress();

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.release()), tail_(o.tail_), tailLen_(std::exchange(o.tailLen_, 0)) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A listening socket bound to `addr` (port 0 picks a free one).
  static Socket listenOn(const WireAddr& addr);
  // Connects to `addr`. A refusal is retried for up to 2 s, then fails (cclSystemError).
  static Socket connectTo(const WireAddr& addr, Deadline deadline);
  // One attempt: the connected socket, or an invalid one when `addr` refused. Throws
  // cclSystemError past the deadline or on any other failure.
  static Socket connectOnce(const WireAddr& addr, Deadline deadline);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int release();
  // Another descriptor of the same socket (dup), for a second owner such as a thread that
  // serves a listener this one keeps.
  Socket duplicate() const;
  // The bound address (with the port the kernel chose).
  WireAddr localAddr() const;

  // Waits for one incoming connection. Throws Error(cclSystemError) on timeout.
  Socket accept(Deadline deadline);
  // Sends/receives exactly `bytes`. A peer that closes the connection -> cclRemoteError;
  // timeout or local failure -> cclSystemError.
  void sendAll(const void* buf, size_t bytes, Deadline deadline);
  void recvAll(void* buf, size_t bytes, Deadline deadline);
  // Non-blocking single attempts; return bytes moved (0 when it would block). recvSome
  // throws cclRemoteError when the peer closed the connection.
  size_t sendSome(const void* buf, size_t bytes);
  size_t recvSome(void* buf, size_t bytes);
  // True when the peer has closed the connection and no unread data is left before that.
  bool peerClosed() const;
  // The last bytes recvSome received (at most kTailBytes), whoever asked for them: what the
  // peer said last before its end (the bootstrap's goodbye, or its news of a lost rank, even
  // when a collective took them for data).
  static constexpr size_t kTailBytes = 8;
  std::string_view lastBytes() const { return {tail_.data() + kTailBytes - tailLen_, tailLen_}; }
  // Wakes every thread blocked on this socket; later I/O fails. Thread-safe.
  void shutdown();

 private:
  int fd_ = -1;
  std::array<char, kTailBytes> tail_{};  // right-aligned
  size_t tailLen_ = 0;
};

// Sends `sendBytes` on `out` while receiving `recvBytes` on `in`, both at once so that a
// ring of ranks that all send first cannot deadlock on full socket buffers.
void exchange(Socket& out, const void* sendBuf, size_t sendBytes, Socket& in, void* recvBuf, size_t recvBytes,
              Deadline deadline);

// Connects to every address at once, one attempt each: per address, the connected socket,
// or an invalid one where it refused (nothing listens there) or had not answered by
// `deadline` (a silent host).
std::vector<Socket> connectAll(const std::vector<WireAddr>& addrs, Deadline deadline);

// Waits until `fd` is ready for `events` (POLLIN/POLLOUT). Returns false on timeout.
bool waitFd(int fd, short events, Deadline deadline);

Deadline deadlineAfter(std::chrono::milliseconds timeout);
// CCL_TIMEOUT (seconds) from now.
Deadline defaultDeadline();

}  // namespace ccl::bootstrap
