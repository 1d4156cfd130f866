// SPDX-License-Identifier: BSD-3-Clause
// Sets an environment variable for the lifetime of the object, e.g. a short CCL_TIMEOUT for
// communicators created inside one test; a null value unsets it for that time.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace ccltest {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace ccltest
