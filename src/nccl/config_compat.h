// SPDX-License-Identifier: BSD-3-Clause
// ncclConfig_t as callers built against any NCCL since 2.14 pass it: only `size` bytes are
// read, fields beyond them take NCCL's defaults, so older and smaller layouts keep working.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nccl/nccl_abi.h"

namespace ccl::nccl {

struct FaceConfig {
  bool blocking = true;
  std::string commName;
  bool given = false;  // the caller passed a config
  // The caller's config as it passed it (its `size` bytes, at most kMaxBytes), for the real
  // NCCL communicator, and copies of the strings it points to.
  static constexpr size_t kMaxBytes = 1024;
  std::vector<unsigned char> bytes;
  std::string netName;
};

// The caller's config for NVIDIA's ncclCommInitRankConfig: every field it set (CGA cluster
// size, CTAs, network, traffic class, CTA policy, ... and those of later NCCL versions,
// passed on unread), but blocking (the face makes the real communicator on a thread of its
// own and waits for it there) and the strings, which point into `c`. Empty without a config.
std::vector<unsigned char> realConfig(const FaceConfig& c);

// Reads `user` (may be NULL). Throws Error(cclInvalidArgument) for a config that was not
// initialised with NCCL_CONFIG_INITIALIZER or holds an invalid `blocking`.
FaceConfig readConfig(const ncclConfig_t* user);

}  // namespace ccl::nccl
