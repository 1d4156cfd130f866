// SPDX-License-Identifier: BSD-3-Clause
#include "common/config.h"

#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace ccl::config {

const std::vector<Var>& all() {
#define CCL_SETTING_VAR(fn, type, name, def, help) {name, def, help},
  static const std::vector<Var> vars = {CCL_SETTINGS(CCL_SETTING_VAR)};
#undef CCL_SETTING_VAR
  return vars;
}

namespace {

std::string readString(const char* name, const char* def) {
  const char* env = std::getenv(name);
  return (env && *env) ? std::string(env) : std::string(def);
}

int64_t readInt(const char* name, const char* def) {
  const std::string s = readString(name, def);
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(s.c_str(), &end, 0);
  CCL_CHECK(end != s.c_str() && errno == 0, cclInvalidArgument, std::string(name) + "='" + s + "' is not an integer");
  int64_t mult = 1;
  if (*end) {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K':
        mult = int64_t{1} << 10;
        break;
      case 'M':
        mult = int64_t{1} << 20;
        break;
      case 'G':
        mult = int64_t{1} << 30;
        break;
      default:
        mult = 0;
    }
    if (mult != 0 && end[1] != '\0') mult = 0;
  }
  CCL_CHECK(mult != 0, cclInvalidArgument, name + std::string("='") + s + "' is not an integer");
  return value * mult;
}

double readDouble(const char* name, const char* def) {
  const std::string s = readString(name, def);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(s.c_str(), &end);
  CCL_CHECK(end != s.c_str() && *end == '\0' && errno == 0, cclInvalidArgument,
            std::string(name) + "='" + s + "' is not a number");
  return value;
}

bool readBool(const char* name, const char* def) {
  const std::string s = readString(name, def);
  for (const char* t : {"1", "true", "yes", "on"})
    if (strcasecmp(s.c_str(), t) == 0) return true;
  return false;
}

}  // namespace

#define CCL_SETTING_DEFINE(fn, type, name, def, help) \
  type fn() { return read##type(name, def); }
CCL_SETTINGS(CCL_SETTING_DEFINE)
#undef CCL_SETTING_DEFINE

}  // namespace ccl::config
