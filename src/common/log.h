// SPDX-License-Identifier: BSD-3-Clause
// Logging to stderr, controlled by CCL_DEBUG (NONE, WARN, INFO, TRACE) and, for INFO and
// TRACE, by CCL_DEBUG_SUBSYS (which layers). Each line is
// prefixed "host:pid:rank [level]". The rank is the one set by the innermost RankScope of
// the calling thread (-1 outside any communicator call).
#pragma once

#include <cstdarg>

namespace ccl::log {

enum class Level { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

// The level from CCL_DEBUG, read once per process.
Level level();
inline bool enabled(Level l) { return static_cast<int>(level()) >= static_cast<int>(l); }

// Whether INFO and TRACE lines of `layer` are logged (CCL_DEBUG_SUBSYS, read once). Each
// library layer's sources are compiled with CCL_LOG_LAYER naming it ("transport", ...);
// code outside the layers passes "" and is always logged.
bool layerEnabled(const char* layer);

void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The rank of the calling thread's innermost RankScope (-1: none).
int currentRank();

// Sets the rank shown in log lines of this thread for its lifetime.
class RankScope {
 public:
  explicit RankScope(int rank);
  ~RankScope();
  RankScope(const RankScope&) = delete;
  RankScope& operator=(const RankScope&) = delete;

 private:
  int saved_;
};

}  // namespace ccl::log

#ifndef CCL_LOG_LAYER
#define CCL_LOG_LAYER ""
#endif

#define CCL_WARN(...) ::ccl::log::write(::ccl::log::Level::kWarn, __VA_ARGS__)
#define CCL_INFO(...)                                                                             \
  do {                                                                                            \
    if (::ccl::log::enabled(::ccl::log::Level::kInfo) && ::ccl::log::layerEnabled(CCL_LOG_LAYER)) \
      ::ccl::log::write(::ccl::log::Level::kInfo, __VA_ARGS__);                                   \
  } while (0)
#define CCL_TRACE(...)                                                                             \
  do {                                                                                             \
    if (::ccl::log::enabled(::ccl::log::Level::kTrace) && ::ccl::log::layerEnabled(CCL_LOG_LAYER)) \
      ::ccl::log::write(::ccl::log::Level::kTrace, __VA_ARGS__);                                   \
  } while (0)
