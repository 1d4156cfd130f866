#include "common/log.h"

#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "common/config.h"

namespace ccl::log {

static thread_local int tlsRank = -1;

Level level() {
  static const Level cached = [] {
    std::string s = config::getString("CCL_DEBUG");
    if (strcasecmp(s.c_str(), "NONE") == 0) return Level::kNone;
    if (strcasecmp(s.c_str(), "INFO") == 0) return Level::kInfo;
    if (strcasecmp(s.c_str(), "TRACE") == 0) return Level::kTrace;
    return Level::kWarn;
  }();
  return cached;
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

RankScope::RankScope(int rank) : saved_(tlsRank) { tlsRank = rank; }
RankScope::~RankScope() { tlsRank = saved_; }

}  // namespace ccl::log
