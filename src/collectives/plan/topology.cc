// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/plan/topology.h"

#include <algorithm>
#include <unordered_map>

#include "common/error.h"
#include "common/hash.h"

namespace ccl::coll {

Topology Topology::fromHostIds(std::span<const uint64_t> ids) {
  CCL_CHECK(!ids.empty(), cclInternalError, "a topology of no ranks");
  Topology t;
  std::unordered_map<uint64_t, int> nodeOfId;
  for (size_t r = 0; r < ids.size(); ++r) {
    auto [it, added] = nodeOfId.emplace(ids[r], t.nodes());
    if (added) t.members.emplace_back();
    t.nodeOf.push_back(it->second);
    t.localRank.push_back(static_cast<int>(t.members[it->second].size()));
    t.members[it->second].push_back(static_cast<int>(r));
  }
  t.digest_ = fnv1a({static_cast<uint64_t>(t.nodeOf.size())});
  for (int n : t.nodeOf) t.digest_ = fnv1a({static_cast<uint64_t>(n)}, t.digest_);
  for (const auto& m : t.members) {
    t.largest_ = std::max(t.largest_, static_cast<int>(m.size()));
    t.uniform_ = t.uniform_ && m.size() == t.members[0].size();
  }
  return t;
}

Topology Topology::blocks(std::span<const int> nodeSizes) {
  std::vector<uint64_t> ids;
  for (size_t n = 0; n < nodeSizes.size(); ++n) {
    CCL_CHECK(nodeSizes[n] > 0, cclInvalidArgument, "a node of no ranks");
    ids.insert(ids.end(), static_cast<size_t>(nodeSizes[n]), n);
  }
  return fromHostIds(ids);
}

std::string Topology::describe() const {
  std::string s = std::to_string(nodes()) + (nodes() == 1 ? " node of " : " nodes of ");
  if (uniform() && nodes() > 1) return s + std::to_string(members[0].size()) + " ranks each";
  for (int n = 0; n < nodes(); ++n) {
    if (n) s += '+';
    s += std::to_string(nodeSize(n));
  }
  return s + " ranks";
}

}  // namespace ccl::coll
