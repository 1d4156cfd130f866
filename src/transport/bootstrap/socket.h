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
#include <mutex>
#include <string>
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

// The address the bootstrap binds to, among this host's interfaces (getifaddrs) as
// chooseInterface picks it with CCL_SOCKET_FAMILY and CCL_SOCKET_IFNAME. Port 0.
WireAddr pickLocalAddress();

// One address of a network interface, as getifaddrs lists it.
struct InterfaceAddress {
  std::string name;
  WireAddr addr;       // AF_INET or AF_INET6, port 0
  unsigned flags = 0;  // IFF_UP, IFF_LOOPBACK, ...
};
// The bootstrap's choice among `addresses` (in getifaddrs' order): the index of the address
// of `family` it binds to, or -1 when none fits. Interfaces that are down never fit. `ifname`
// (CCL_SOCKET_IFNAME) set: that interface only, whatever it is. Unset: what other hosts can
// reach, as NCCL does by default (NCCL_SOCKET_IFNAME unset): the first interface that is
// neither loopback nor host-only (hostOnlyInterface); else a host-only one; loopback last.
// Within each, a global address before a link-local one.
int chooseInterface(const std::vector<InterfaceAddress>& addresses, int family, const std::string& ifname);
// Interfaces that a host makes for its containers and VMs: bridges and virtual links other
// hosts do not route to (docker*, virbr*, veth*, br-*), though they are up, not loopback, and
// often listed before the host's own.
bool hostOnlyInterface(const std::string& name);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept { *this = std::move(o); }
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
  // sendSome of the bytes make(position) returns, `position` being the bytes this socket has
  // sent so far: under the lock of its sends, so that no other thread's bytes come between
  // the count and the bytes that name it (the bootstrap's end notes, ring.h).
  template <typename Make>
  size_t sendAt(Make&& make) {
    std::lock_guard<std::mutex> lock(sendMu_);
    const auto bytes = make(sent_);
    return sendLocked(bytes.data(), bytes.size());
  }
  // True when the peer has closed the connection and no unread data is left before that.
  bool peerClosed() const;
  // The stream from the peer as far as it has come, whether recvSome read it or it waits
  // unread: its last bytes (at most kTailBytes), where they end in the stream, and how much of
  // it recvSome has read. So what the peer said last before its end (the bootstrap's end note)
  // is found whoever took it: a collective, as data, or nobody yet. Reads nothing; safe beside
  // another thread's recvSome (the watcher's look beside a collective).
  static constexpr size_t kTailBytes = 16;
  struct Tail {
    std::string bytes;
    uint64_t end = 0;   // bytes of the stream up to the end of `bytes`
    uint64_t read = 0;  // bytes recvSome has read
  };
  Tail tail() const;
  // Bytes recvSome has read; bytes received and not read yet.
  uint64_t read() const {
    std::lock_guard<std::mutex> lock(recvMu_);
    return received_;
  }
  size_t unread() const;
  // Wakes every thread blocked on this socket; later I/O fails. Thread-safe.
  void shutdown();

 private:
  size_t sendLocked(const void* buf, size_t bytes);

  int fd_ = -1;
  std::mutex sendMu_;                    // a send, and the count of bytes sent before it
  uint64_t sent_ = 0;                    // bytes sent so far
  mutable std::mutex recvMu_;            // a read, and the count and tail it updates (tail() reads them)
  uint64_t received_ = 0;                // bytes recvSome has read
  std::array<char, kTailBytes> tail_{};  // the last of them, right-aligned
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
