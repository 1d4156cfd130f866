// SPDX-License-Identifier: BSD-3-Clause
// The host identity a rank contributes at init: ranks with equal identities share a host and
// form one node of their communicators. By default it is NCCL's host hash (the host name and
// the kernel's boot id, so two boots, or two containers with their own host names, are two
// hosts); a text given instead (cclConfig_t.hostId, CCL_HOST_ID) is hashed the same way, so
// tests can make nodes of ranks on one machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ccl::host {

// Longest identity text accepted: a host name is at most 255 bytes (POSIX HOST_NAME_MAX is
// 64 on Linux, DNS names 253), so a longer value is a mistake, not a host.
inline constexpr size_t kMaxIdChars = 255;

// 64-bit FNV-1a of `text`.
uint64_t hashText(std::string_view text);

// Throws Error(cclInvalidArgument) naming `source` unless `text` is a usable identity:
// non-empty, at most kMaxIdChars bytes, and free of control characters (which would make log
// lines and error messages ambiguous, and are never part of a host name).
void checkIdText(std::string_view text, const std::string& source);

// This host's own identity: the host name and /proc/sys/kernel/random/boot_id hashed
// together. Without a readable boot id the host name alone is hashed (a kernel without
// procfs still has one name per host).
uint64_t hostHash();

struct Identity {
  uint64_t id = 0;
  std::string source;  // where it came from, for log lines: "config->hostId", "CCL_HOST_ID", "host name and boot id"
};

// A rank's identity: `configured` (cclConfig_t.hostId; NULL when undefined), else CCL_HOST_ID
// when set and not empty, else hostHash(). A given text is checked with checkIdText.
Identity resolve(const char* configured);

}  // namespace ccl::host
