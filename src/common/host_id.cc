// SPDX-License-Identifier: BSD-3-Clause
#include "common/host_id.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <fstream>

#include "common/config.h"
#include "common/error.h"

namespace ccl::host {

uint64_t hashText(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void checkIdText(std::string_view text, const std::string& source) {
  CCL_CHECK(!text.empty(), cclInvalidArgument, source + " is empty; give a host identity or leave it undefined");
  CCL_CHECK(text.size() <= kMaxIdChars, cclInvalidArgument,
            source + " has " + std::to_string(text.size()) + " characters; a host identity has at most " +
                std::to_string(kMaxIdChars));
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    CCL_CHECK(!std::iscntrl(c), cclInvalidArgument,
              source + " holds a control character (code " + std::to_string(c) + ") at position " + std::to_string(i) +
                  "; a host identity is printable text");
  }
}

uint64_t hostHash() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  std::string text = name;
  std::ifstream bootId("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (bootId && std::getline(bootId, boot)) text += boot;
  return hashText(text);
}

Identity resolve(const char* configured) {
  if (configured) {
    checkIdText(configured, "config->hostId");
    return {hashText(configured), "config->hostId"};
  }
  const std::string env = config::hostId();
  if (!env.empty()) {
    checkIdText(env, "CCL_HOST_ID");
    return {hashText(env), "CCL_HOST_ID"};
  }
  return {hostHash(), "host name and boot id"};
}

}  // namespace ccl::host
