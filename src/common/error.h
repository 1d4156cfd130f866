// SPDX-License-Identifier: BSD-3-Clause
// Errors inside the library: an exception that carries a cclResult_t. Exported functions
// catch it at the C boundary (src/api) and turn it into a result code plus a message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ccl/ccl.h"

namespace ccl {

class Error : public std::runtime_error {
 public:
  Error(cclResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cclResult_t code() const noexcept { return code_; }

 private:
  cclResult_t code_;
};

// Throws Error(code, message) when `cond` is false. The message is built only on failure.
#define CCL_CHECK(cond, code, msg)                                \
  do {                                                            \
    if (!(cond)) throw ::ccl::Error((code), std::string() + msg); \
  } while (0)

[[noreturn]] void throwSystemError(const std::string& what, int err);

// A number for each recorded failure, increasing over the process: what orders a thread's
// last failure against a communicator's asynchronous one (cclGetLastError, ncclGetLastError
// with a communicator), which other threads record.
uint64_t nextErrorSerial();

}  // namespace ccl
