// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/links/factory.h"

#include "collectives/exec/links/nccl_link.h"
#include "collectives/exec/links/staging_cache.h"
#include "collectives/exec/links/transport_link.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

struct Kind {
  const char* name;
  bool needsNccl;
  std::unique_ptr<StreamLink> (*make)(const LinkParts&, Device&);
};

// Staged: device bytes through the device's pinned host memory over the ccl transport, at
// their true lengths. NCCL: grouped ncclSend/ncclRecv on the stream, every stream at its
// bound (quantizers fixed-length).
const Kind kKinds[] = {
    {"staged", false,
     [](const LinkParts& p, Device& d) -> std::unique_ptr<StreamLink> {
       CCL_CHECK(p.transport, cclInternalError, "the staged link needs the communicator's transport");
       return std::make_unique<TransportLink>(*p.transport, /*exactLengths=*/false, p.timeout, p.aborted,
                                              reusingStaging(d.staging(), d.ordinal()));
     }},
    {"nccl", true,
     [](const LinkParts& p, Device&) -> std::unique_ptr<StreamLink> {
       CCL_CHECK(p.nccl, cclInternalError, "the NCCL link needs NVIDIA's communicator");
       return std::make_unique<NcclLink>(*p.nccl);
     }},
};

const Kind* find(const std::string& name) {
  for (const Kind& k : kKinds)
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace

bool isLinkName(const std::string& name) { return find(name) != nullptr; }

std::string linkNames() {
  std::string out;
  for (const Kind& k : kKinds) out += std::string(out.empty() ? "" : ", ") + k.name;
  return out;
}

bool linkNeedsNccl(const std::string& name) {
  const Kind* k = find(name);
  return k && k->needsNccl;
}

std::unique_ptr<StreamLink> makeLink(const std::string& name, const LinkParts& parts, Device& device) {
  const Kind* k = find(name);
  CCL_CHECK(k, cclInvalidArgument, "'" + name + "' is not a device link (" + linkNames() + ")");
  return k->make(parts, device);
}

}  // namespace ccl::coll
