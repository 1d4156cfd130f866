// SPDX-License-Identifier: BSD-3-Clause
// ncclConfig_t as callers built against any NCCL since 2.14 pass it: only `size` bytes are
// read, fields beyond them take NCCL's defaults, so older and smaller layouts keep working.
#pragma once

#include <string>

#include "nccl/nccl_abi.h"

namespace ccl::nccl {

struct FaceConfig {
  bool blocking = true;
  std::string commName;
  bool given = false;  // the caller passed a config
};

// Reads `user` (may be NULL). Throws Error(cclInvalidArgument) for a config that was not
// initialised with NCCL_CONFIG_INITIALIZER or holds an invalid `blocking`.
FaceConfig readConfig(const ncclConfig_t* user);

}  // namespace ccl::nccl
