// SPDX-License-Identifier: BSD-3-Clause
#include "transport/factory.h"

#include <strings.h>

#include "common/error.h"
#include "transport/local/local_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace ccl::transport {
namespace {

struct Kind {
  const char* name;
  bool built;  // this build has it
  std::unique_ptr<Transport> (*create)(bootstrap::Bootstrap&, uint64_t hostId);
};

std::unique_ptr<Transport> ucx(bootstrap::Bootstrap& bs, uint64_t) { return createUcxTransport(bs); }
std::unique_ptr<Transport> local(bootstrap::Bootstrap& bs, uint64_t) { return createLocalTransport(bs); }

// In the order "auto" tries them. The shared-memory channel joins the ranks of one host
// through rings (processes or threads) and takes UCX for pairs on other hosts, so it serves
// every layout UCX does, and in a build without UCX every layout on one host; UCX alone and
// the in-process transport (threads of one process) are there to be asked for by name.
const Kind kKinds[] = {
    {"shm", true, createShmTransport},
    {"ucx", kUcxBuilt, ucx},
    {"local", true, local},
};

}  // namespace

std::unique_ptr<Transport> createTransport(const std::string& name, bootstrap::Bootstrap& bs, uint64_t hostId) {
  const bool any = strcasecmp(name.c_str(), "auto") == 0;
  for (const Kind& k : kKinds) {
    if (!any && strcasecmp(name.c_str(), k.name) != 0) continue;
    if (k.built) return k.create(bs, hostId);
    CCL_CHECK(any, cclInvalidArgument,
              "CCL_TRANSPORT=" + name + ": this build has no " + k.name + " transport (it has " +
                  availableTransports() + ")");
  }
  throw Error(cclInvalidArgument,
              "CCL_TRANSPORT='" + name + "' is not a transport (auto, " + availableTransports() + ")");
}

std::string availableTransports() {
  std::string out;
  for (const Kind& k : kKinds)
    if (k.built) out += std::string(out.empty() ? "" : ", ") + k.name;
  return out;
}

}  // namespace ccl::transport
