// The one registry of CCL_* environment variables. Every variable the library reads is
// declared in config.cc with its default and help text; reading an undeclared name is a
// programming error and throws. Values are read from the environment at each call so a
// communicator created later sees the current setting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ccl::config {

struct Var {
  const char* name;
  const char* defaultValue;
  const char* help;
};

// Every declared variable, in declaration order.
const std::vector<Var>& all();

// The variable's value, or its default when unset or empty.
std::string getString(const char* name);

// The value parsed as an integer; accepts K/M/G suffixes (powers of 1024). Throws
// Error(cclInvalidArgument) naming the variable when the value does not parse.
int64_t getInt(const char* name);

// The value parsed as a floating-point number; throws like getInt.
double getDouble(const char* name);

// True when the value is 1/true/yes/on (case-insensitive).
bool getBool(const char* name);

}  // namespace ccl::config
