// SPDX-License-Identifier: BSD-3-Clause
#include "common/log.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "common/config.h"

namespace ccl::log {

static thread_local int tlsRank = -1;

Level level() {
  static const Level cached = [] {
    std::string s = config::debug();
    if (strcasecmp(s.c_str(), "NONE") == 0) return Level::kNone;
    if (strcasecmp(s.c_str(), "INFO") == 0) return Level::kInfo;
    if (strcasecmp(s.c_str(), "TRACE") == 0) return Level::kTrace;
    return Level::kWarn;
  }();
  return cached;
}

namespace {

// The layers CCL_DEBUG_SUBSYS names (the library's folders), one bit each.
constexpr const char* kLayers[] = {"common", "transport", "codecs", "collectives", "api", "nccl"};

unsigned layerBit(const char* layer) {
  for (unsigned i = 0; i < sizeof(kLayers) / sizeof(kLayers[0]); ++i)
    if (strcasecmp(layer, kLayers[i]) == 0) return 1u << i;
  return 0;
}

unsigned parseLayers(const std::string& value) {
  std::string list = value;
  const bool except = !list.empty() && list[0] == '^';
  if (except) list.erase(0, 1);
  unsigned mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    if (strcasecmp(item.c_str(), "ALL") == 0) {
      mask = ~0u;
    } else if (!item.empty()) {
      const unsigned bit = layerBit(item.c_str());
      if (bit == 0) std::fprintf(stderr, "[ccl WARN] CCL_DEBUG_SUBSYS: unknown layer '%s' ignored\n", item.c_str());
      mask |= bit;
    }
    start = end + 1;
  }
  return except ? ~mask : mask;
}

}  // namespace

bool layerEnabled(const char* layer) {
  static const unsigned mask = parseLayers(config::debugSubsys());
  return *layer == '\0' || (mask & layerBit(layer)) != 0;
}

void write(Level l, const char* fmt, ...) {
  if (!enabled(l)) return;
  static const char* names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  // One fprintf per line so lines from rank threads do not interleave mid-line.
  std::fprintf(stderr, "%s:%d:%d [ccl %s] %s\n", host, static_cast<int>(getpid()), tlsRank, names[static_cast<int>(l)],
               body);
}

int currentRank() { return tlsRank; }

RankScope::RankScope(int rank) : saved_(tlsRank) { tlsRank = rank; }
RankScope::~RankScope() { tlsRank = saved_; }

}  // namespace ccl::log
