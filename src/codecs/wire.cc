// SPDX-License-Identifier: BSD-3-Clause
#include "codecs/wire.h"

#include <cstring>
#include <string>
#include <string_view>

#include "common/error.h"

namespace ccl::codec {

void writeHeader(const Header& h, void* out) { storeHeader(h, static_cast<uint8_t*>(out)); }

size_t writeFailedSender(void* out, size_t outBytes) {
  if (out == nullptr || outBytes < kHeaderBytes) return 0;
  storeHeader(failedSenderHeader(), static_cast<uint8_t*>(out));
  return kHeaderBytes;
}

Header readHeader(const void* in, size_t inBytes) {
  auto fail = [](const std::string& what) { throw Error(cclInvalidUsage, "compressed stream: " + what); };
  if (in == nullptr && inBytes != 0) fail("null buffer");
  if (inBytes < kHeaderBytes) fail("shorter than its header (" + std::to_string(inBytes) + " bytes)");
  const Header h = loadHeader(static_cast<const uint8_t*>(in));
  if (const char* problem = headerProblem(h, inBytes)) {
    if (failedSender(h)) throw Error(cclRemoteError, std::string("compressed stream: ") + problem);
    // The numbers behind the problems a sender's bug most often causes.
    std::string what = problem;
    const std::string_view p = problem;
    if (p == "unsupported version") what.append(" ").append(std::to_string(h.version));
    if (p == "unknown codec") what.append(" ").append(std::to_string(h.codec));
    if (p == "bad block size") what.append(" ").append(std::to_string(h.blockSize));
    if (p == "truncated")
      what.append(": needs ")
          .append(std::to_string(layoutOf(h).total))
          .append(" bytes, got ")
          .append(std::to_string(inBytes));
    fail(what);
  }
  return h;
}

}  // namespace ccl::codec
