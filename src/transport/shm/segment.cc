// SPDX-License-Identifier: BSD-3-Clause
#include "transport/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.h"

namespace ccl::transport::shm {

Segment::Segment(Segment&& o) noexcept { *this = std::move(o); }

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    this->~Segment();
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    name_ = std::move(o.name_);
    o.name_.clear();
  }
  return *this;
}

Segment::~Segment() {
  unlink();
  if (base_) munmap(base_, bytes_);
  base_ = nullptr;
}

void Segment::unlink() {
  if (!name_.empty()) shm_unlink(name_.c_str());
  name_.clear();
}

Segment Segment::create(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  CCL_CHECK(fd >= 0, cclSystemError, "shm_open(" + name + "): " + std::strerror(errno));
  Segment s;
  s.name_ = name;  // unlinked by the destructor if anything below fails
  // Reserve the pages now: on a full /dev/shm (a container's is 64 MiB by default) a write
  // to a page ftruncate only promised would be SIGBUS; this is an error instead.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  const bool sized = reserved == 0;
  const int err = reserved;
  void* p = sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int mapErr = errno;
  close(fd);
  CCL_CHECK(
      sized, cclSystemError,
      "posix_fallocate(" + name + ", " + std::to_string(bytes) + "): " + std::strerror(err) + " (is /dev/shm full?)");
  CCL_CHECK(p != MAP_FAILED, cclSystemError, "mmap(" + name + "): " + std::strerror(mapErr));
  s.base_ = p;
  s.bytes_ = bytes;
  return s;
}

Segment Segment::open(const std::string& name, size_t bytes, const uint8_t token[16], std::string* why) {
  Segment s;
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    *why = "shm_open(" + name + "): " + std::strerror(errno);
    return s;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    *why = name + " is not a segment of this user and size";
    return s;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *why = "mmap(" + name + "): " + std::strerror(errno);
    return s;
  }
  s.base_ = p;
  s.bytes_ = bytes;
  const SegmentHeader* h = s.header();
  if (h->magic != kSegmentMagic || std::memcmp(h->token, token, sizeof(h->token)) != 0) {
    *why = name + " does not carry this communicator's token";
    return Segment{};  // s unmaps on return
  }
  return s;
}

uint64_t pidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string segmentName(const uint8_t token[16], uint64_t pidNs, int rank, int pid) {
  std::string name = "/ccl-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(hex, sizeof(hex), "%02x", token[i]);
    name += hex;
  }
  for (const uint64_t field : {pidNs, static_cast<uint64_t>(rank), static_cast<uint64_t>(pid)}) {
    name += '-';
    name += std::to_string(field);
  }
  return name;
}

bool processAlive(int pid) {
  if (kill(pid, 0) != 0) return errno != ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return true;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  const char* state = read ? std::strrchr(line, ')') : nullptr;  // "pid (comm) S ..."
  return !(state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X'));
}

int sweepStaleSegments() {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  // "ccl-<token>-<pidNs>-": segments of this namespace.
  std::string ns(1, '-');  // appended: GCC 12 warns (-Wrestrict) of nothing on "-" + string
  ns += std::to_string(pidNamespace());
  ns += '-';
  constexpr size_t kNsAt = 4 + 32;  // after "ccl-" and the token's hex
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("ccl-", 0) != 0 || n.size() <= kNsAt || n.compare(kNsAt, ns.size(), ns) != 0) continue;
    const size_t dash = n.rfind('-');
    char* end = nullptr;
    const long pid = std::strtol(n.c_str() + dash + 1, &end, 10);
    if (dash == std::string::npos || *end != '\0' || pid <= 0 || processAlive(static_cast<int>(pid))) continue;
    struct stat st {};
    const std::string path = "/dev/shm/" + n;
    if (stat(path.c_str(), &st) != 0 || st.st_uid != geteuid()) continue;
    if (shm_unlink(("/" + n).c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace ccl::transport::shm
