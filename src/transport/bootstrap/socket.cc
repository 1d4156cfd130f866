// SPDX-License-Identifier: BSD-3-Clause
#include "transport/bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::bootstrap {

socklen_t toSockaddr(const WireAddr& w, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (w.family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    sin->sin_port = w.port;
    std::memcpy(&sin->sin_addr, w.addr, 4);
    return sizeof(sockaddr_in);
  }
  if (w.family == AF_INET6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = w.port;
    sin6->sin6_scope_id = w.scopeId;
    std::memcpy(&sin6->sin6_addr, w.addr, 16);
    return sizeof(sockaddr_in6);
  }
  throw Error(cclInvalidArgument, "bootstrap address has unknown family " + std::to_string(w.family));
}

static WireAddr fromSockaddr(const sockaddr* sa) {
  WireAddr w{};
  if (sa->sa_family == AF_INET) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
    w.family = AF_INET;
    w.port = sin->sin_port;
    std::memcpy(w.addr, &sin->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
    w.family = AF_INET6;
    w.port = sin6->sin6_port;
    w.scopeId = sin6->sin6_scope_id;
    std::memcpy(w.addr, &sin6->sin6_addr, 16);
  }
  return w;
}

std::string toString(const WireAddr& w) {
  char host[INET6_ADDRSTRLEN] = "?";
  inet_ntop(w.family, w.addr, host, sizeof(host));
  std::string s;
  if (w.family == AF_INET6) s += '[';
  s += host;
  if (w.family == AF_INET6) s += ']';
  return s + ":" + std::to_string(ntohs(w.port));
}

static int familyFromConfig() {
  std::string f = config::socketFamily();
  if (f == "AF_INET" || f == "inet" || f == "ipv4" || f == "4") return AF_INET;
  if (f == "AF_INET6" || f == "inet6" || f == "ipv6" || f == "6") return AF_INET6;
  throw Error(cclInvalidArgument, "CCL_SOCKET_FAMILY='" + f + "' must be AF_INET or AF_INET6");
}

static bool isLinkLocal(const WireAddr& w) {
  if (w.family != AF_INET6) return false;
  in6_addr a;
  std::memcpy(&a, w.addr, sizeof a);
  return IN6_IS_ADDR_LINKLOCAL(&a);
}

bool hostOnlyInterface(const std::string& name) {
  for (const char* prefix : {"docker", "virbr", "veth", "br-"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

int chooseInterface(const std::vector<InterfaceAddress>& addresses, int family, const std::string& ifname) {
  // Ranked choices, lowest wins, the first listed among equals: 0 a global address of an
  // interface other hosts reach (or of the one named), 1 a link-local one, 2 and 3 the same
  // on a host-only interface, 4 loopback.
  int best = -1, bestRank = 5;
  for (size_t i = 0; i < addresses.size(); ++i) {
    const InterfaceAddress& a = addresses[i];
    if (a.addr.family != family || !(a.flags & IFF_UP)) continue;
    if (!ifname.empty() && ifname != a.name) continue;
    int rank = isLinkLocal(a.addr) ? 1 : 0;
    if (ifname.empty() && (a.flags & IFF_LOOPBACK))
      rank = 4;
    else if (ifname.empty() && hostOnlyInterface(a.name))
      rank += 2;
    if (rank < bestRank) best = static_cast<int>(i), bestRank = rank;
  }
  return best;
}

WireAddr pickLocalAddress() {
  const int family = familyFromConfig();
  const std::string ifname = config::socketIfname();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwSystemError("getifaddrs", errno);
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, freeifaddrs);
  std::vector<InterfaceAddress> addresses;
  for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next)
    if (ifa->ifa_addr && (ifa->ifa_addr->sa_family == AF_INET || ifa->ifa_addr->sa_family == AF_INET6))
      addresses.push_back({ifa->ifa_name, fromSockaddr(ifa->ifa_addr), ifa->ifa_flags});
  const int chosen = chooseInterface(addresses, family, ifname);
  CCL_CHECK(chosen >= 0, cclSystemError,
            "no usable " + std::string(family == AF_INET ? "IPv4" : "IPv6") + " address" +
                (ifname.empty() ? std::string() : " on interface CCL_SOCKET_IFNAME=" + ifname));
  const InterfaceAddress& best = addresses[static_cast<size_t>(chosen)];
  WireAddr w = best.addr;
  w.port = 0;
  if (isLinkLocal(w)) w.scopeId = if_nametoindex(best.name.c_str());
  CCL_INFO("bootstrap uses interface %s address %s%s", best.name.c_str(), toString(w).c_str(),
           ifname.empty() && hostOnlyInterface(best.name)
               ? " (host-only: no other interface is up, and other hosts may not reach it; CCL_SOCKET_IFNAME names one)"
               : "");
  return w;
}

Deadline deadlineAfter(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }

// Beyond the largest CCL_TIMEOUT a communicator accepts (api refuses it there), a deadline
// would overflow the clock.
Deadline defaultDeadline() {
  return deadlineAfter(std::chrono::seconds(std::min(config::timeout(), config::kMaxTimeoutSeconds)));
}

bool waitFd(int fd, short events, Deadline deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) return false;
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<long long>(left + 1, 1 << 30)));
    if (rc > 0) return true;  // errors and hang-ups are reported by the following I/O call
    if (rc < 0 && errno != EINTR) throwSystemError("poll", errno);
  }
}

static int newSocket(int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throwSystemError("socket", errno);
  return fd;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

// Moves happen while one thread owns both sockets (setting a connection up): the locks stay.
Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
    sent_ = std::exchange(o.sent_, 0);
    received_ = std::exchange(o.received_, 0);
    tail_ = o.tail_;
    tailLen_ = std::exchange(o.tailLen_, 0);
  }
  return *this;
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

Socket Socket::listenOn(const WireAddr& addr) {
  Socket s(newSocket(addr.family));
  int one = 1;
  setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage ss;
  socklen_t len = toSockaddr(addr, &ss);
  if (::bind(s.fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0) throwSystemError("bind " + toString(addr), errno);
  if (::listen(s.fd_, SOMAXCONN) != 0) throwSystemError("listen", errno);
  return s;
}

Socket Socket::duplicate() const {
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throwSystemError("dup", errno);
  return Socket(fd);
}

WireAddr Socket::localAddr() const {
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throwSystemError("getsockname", errno);
  WireAddr w = fromSockaddr(reinterpret_cast<sockaddr*>(&ss));
  return w;
}

static void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Socket Socket::connectOnce(const WireAddr& addr, Deadline deadline) {
  Socket s(newSocket(addr.family));
  sockaddr_storage ss;
  socklen_t len = toSockaddr(addr, &ss);
  int rc;
  do rc = ::connect(s.fd(), reinterpret_cast<sockaddr*>(&ss), len);
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS && errno != EALREADY) {
    if (errno == ECONNREFUSED || errno == EAGAIN) return Socket();
    throwSystemError("connect to " + toString(addr), errno);
  }
  if (rc != 0) {
    if (!waitFd(s.fd(), POLLOUT, deadline)) throw Error(cclSystemError, "timeout connecting to " + toString(addr));
    int err = 0;
    socklen_t elen = sizeof(err);
    getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err == ECONNREFUSED) return Socket();
    if (err != 0) throwSystemError("connect to " + toString(addr), err);
  }
  setNoDelay(s.fd());
  return s;
}

Socket Socket::connectTo(const WireAddr& addr, Deadline deadline) {
  // Every listener the bootstrap connects to exists before its address is published, so a
  // refusal means the process or rendezvous is gone: retry briefly (transient overload),
  // then fail instead of waiting for the whole timeout.
  const Deadline giveUp = std::min(deadline, deadlineAfter(std::chrono::seconds(2)));
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(100))) {
    Socket s = connectOnce(addr, deadline);
    if (s.valid()) return s;
    if (Clock::now() + pause >= giveUp)
      throw Error(cclSystemError,
                  "connection refused by " + toString(addr) + " (its process exited or its rendezvous ended)");
    std::this_thread::sleep_for(pause);
  }
}

std::vector<Socket> connectAll(const std::vector<WireAddr>& addrs, Deadline deadline) {
  std::vector<Socket> out(addrs.size());
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  for (size_t i = 0; i < addrs.size(); ++i) {
    Socket s(newSocket(addrs[i].family));
    sockaddr_storage ss;
    const socklen_t len = toSockaddr(addrs[i], &ss);
    int rc;
    do rc = ::connect(s.fd(), reinterpret_cast<sockaddr*>(&ss), len);
    while (rc != 0 && errno == EINTR);
    if (rc == 0) {
      out[i] = std::move(s);
    } else if (errno == EINPROGRESS) {
      fds.push_back({s.fd(), POLLOUT, 0});
      which.push_back(i);
      out[i] = std::move(s);
    }  // refused (or unreachable) at once: left invalid
  }
  size_t left = fds.size();
  while (left > 0) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (ms < 0) break;
    const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(ms + 1, 1 << 30)));
    if (rc < 0 && errno != EINTR) throwSystemError("poll", errno);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      int err = 0;
      socklen_t elen = sizeof(err);
      getsockopt(fds[k].fd, SOL_SOCKET, SO_ERROR, &err, &elen);
      if (err != 0) out[which[k]] = Socket();
      fds[k].fd = -1;  // poll skips it from now on
      --left;
    }
  }
  for (size_t k = 0; k < fds.size(); ++k)
    if (fds[k].fd >= 0) out[which[k]] = Socket();  // not connected by the deadline
  for (Socket& s : out)
    if (s.valid()) setNoDelay(s.fd());
  return out;
}

Socket Socket::accept(Deadline deadline) {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throwSystemError("accept", errno);
    if (!waitFd(fd_, POLLIN, deadline)) throw Error(cclSystemError, "timeout waiting for a bootstrap connection");
  }
}

size_t Socket::sendSome(const void* buf, size_t bytes) {
  std::lock_guard<std::mutex> lock(sendMu_);
  return sendLocked(buf, bytes);
}

size_t Socket::sendLocked(const void* buf, size_t bytes) {
  for (;;) {
    ssize_t n = ::send(fd_, buf, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      sent_ += static_cast<uint64_t>(n);
      return static_cast<size_t>(n);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == EPIPE || errno == ECONNRESET) throw Error(cclRemoteError, "bootstrap peer closed the connection");
    throwSystemError("send", errno);
  }
}

size_t Socket::recvSome(void* buf, size_t bytes) {
  if (bytes == 0) return 0;
  std::lock_guard<std::mutex> lock(recvMu_);
  for (;;) {
    ssize_t n = ::recv(fd_, buf, bytes, MSG_DONTWAIT);
    if (n > 0) {
      received_ += static_cast<uint64_t>(n);
      // Keep the last kTailBytes, right-aligned.
      const size_t got = static_cast<size_t>(n), take = std::min(got, kTailBytes),
                   keep = std::min(tailLen_, kTailBytes - take);
      std::memmove(tail_.data() + kTailBytes - keep - take, tail_.data() + kTailBytes - keep, keep);
      std::memcpy(tail_.data() + kTailBytes - take, static_cast<const char*>(buf) + got - take, take);
      tailLen_ = keep + take;
      return got;
    }
    if (n == 0) throw Error(cclRemoteError, "bootstrap peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) throw Error(cclRemoteError, "bootstrap peer reset the connection");
    throwSystemError("recv", errno);
  }
}

void Socket::sendAll(const void* buf, size_t bytes, Deadline deadline) {
  auto* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    size_t n = sendSome(p, bytes);
    p += n, bytes -= n;
    if (bytes > 0 && n == 0 && !waitFd(fd_, POLLOUT, deadline))
      throw Error(cclSystemError, "timeout sending on a bootstrap socket");
  }
}

void Socket::recvAll(void* buf, size_t bytes, Deadline deadline) {
  auto* p = static_cast<char*>(buf);
  while (bytes > 0) {
    size_t n = recvSome(p, bytes);
    p += n, bytes -= n;
    if (bytes > 0 && n == 0 && !waitFd(fd_, POLLIN, deadline))
      throw Error(cclSystemError, "timeout receiving on a bootstrap socket");
  }
}

bool Socket::peerClosed() const {
  if (fd_ < 0) return true;
  char c;
  for (;;) {
    ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n > 0) return false;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

Socket::Tail Socket::tail() const {
  std::lock_guard<std::mutex> lock(recvMu_);
  Tail t;
  t.read = received_;
  t.bytes.assign(tail_.data() + kTailBytes - tailLen_, tailLen_);
  t.end = received_;
  if (const size_t waiting = unread(); waiting > 0) {
    // All of them: the stream's end is what counts, and a peek starts at the first unread byte.
    std::string unreadBytes(waiting, '\0');
    ssize_t n;
    do n = ::recv(fd_, unreadBytes.data(), unreadBytes.size(), MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
      t.bytes.append(unreadBytes.data(), static_cast<size_t>(n));
      t.end += static_cast<uint64_t>(n);
    }
  }
  if (t.bytes.size() > kTailBytes) t.bytes.erase(0, t.bytes.size() - kTailBytes);
  return t;
}

size_t Socket::unread() const {
  int n = 0;
  if (fd_ < 0 || ::ioctl(fd_, FIONREAD, &n) != 0 || n < 0) return 0;
  return static_cast<size_t>(n);
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void exchange(Socket& out, const void* sendBuf, size_t sendBytes, Socket& in, void* recvBuf, size_t recvBytes,
              Deadline deadline) {
  auto* sp = static_cast<const char*>(sendBuf);
  auto* rp = static_cast<char*>(recvBuf);
  while (sendBytes > 0 || recvBytes > 0) {
    size_t s = sendBytes ? out.sendSome(sp, sendBytes) : 0;
    size_t r = recvBytes ? in.recvSome(rp, recvBytes) : 0;
    sp += s, sendBytes -= s;
    rp += r, recvBytes -= r;
    if ((s | r) != 0 || (sendBytes == 0 && recvBytes == 0)) continue;
    pollfd p[2] = {{out.fd(), static_cast<short>(sendBytes ? POLLOUT : 0), 0},
                   {in.fd(), static_cast<short>(recvBytes ? POLLIN : 0), 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) throw Error(cclSystemError, "timeout in a bootstrap exchange");
    int rc = poll(p, 2, static_cast<int>(std::min<long long>(left + 1, 1 << 30)));
    if (rc < 0 && errno != EINTR) throwSystemError("poll", errno);
  }
}

}  // namespace ccl::bootstrap
