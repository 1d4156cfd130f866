// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/config_compat.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "common/error.h"

namespace ccl::nccl {
namespace {

constexpr unsigned kNcclConfigMagic = 0xcafebeef;  // what NCCL_CONFIG_INITIALIZER writes

}  // namespace

FaceConfig readConfig(const ncclConfig_t* user) {
  FaceConfig out;
  if (!user) return out;
  CCL_CHECK(user->size >= offsetof(ncclConfig_t, blocking) + sizeof(int), cclInvalidArgument,
            "config->size " + std::to_string(user->size) + " is smaller than any ncclConfig_t layout");
  CCL_CHECK(user->magic == kNcclConfigMagic, cclInvalidArgument,
            "config->magic is not NCCL's: initialise the config with NCCL_CONFIG_INITIALIZER");
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  std::memcpy(&c, user, std::min(user->size, sizeof(c)));
  CCL_CHECK(c.blocking == NCCL_CONFIG_UNDEF_INT || c.blocking == 0 || c.blocking == 1, cclInvalidArgument,
            "config->blocking must be 0 or 1, not " + std::to_string(c.blocking));
  out.given = true;
  out.blocking = c.blocking != 0;  // undefined means blocking, as in NCCL
  if (c.commName) out.commName = c.commName;
  if (c.netName) out.netName = c.netName;
  const auto* raw = reinterpret_cast<const unsigned char*>(user);
  out.bytes.assign(raw, raw + std::min(user->size, FaceConfig::kMaxBytes));
  return out;
}

std::vector<unsigned char> realConfig(const FaceConfig& c) {
  if (!c.given) return {};
  std::vector<unsigned char> out = c.bytes;
  auto set = [&](size_t offset, const void* value, size_t bytes) {
    if (offset + bytes <= out.size()) std::memcpy(out.data() + offset, value, bytes);
  };
  const int blocking = 1;
  set(offsetof(ncclConfig_t, blocking), &blocking, sizeof(int));
  const char* net = c.netName.empty() ? nullptr : c.netName.c_str();
  const char* name = c.commName.empty() ? nullptr : c.commName.c_str();
  set(offsetof(ncclConfig_t, netName), &net, sizeof(net));
  set(offsetof(ncclConfig_t, commName), &name, sizeof(name));
  return out;
}

}  // namespace ccl::nccl
