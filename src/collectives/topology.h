// SPDX-License-Identifier: BSD-3-Clause
// The nodes of a communicator: which ranks share a host (and so a fast link), made from one
// host identity per rank. Nodes are numbered in the order of their first rank, and a node's
// ranks in rank order, so every rank derives the same topology from the same identities.
// Hierarchical plans read it through CollArgs; flat plans ignore it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ccl::coll {

struct Topology {
  std::vector<int> nodeOf;                // per rank: its node
  std::vector<int> localRank;             // per rank: its index among its node's ranks
  std::vector<std::vector<int>> members;  // per node: its ranks, ascending
  uint64_t digest_ = 0;                   // of nodeOf (digest())
  int largest_ = 0;                       // the largest node's ranks (largestNode())

  // One node per distinct identity (ids[r]: rank r's host identity).
  static Topology fromHostIds(std::span<const uint64_t> ids);
  // `nranks` ranks in nodes of the given sizes, consecutive ranks together.
  static Topology blocks(std::span<const int> nodeSizes);

  int nranks() const { return static_cast<int>(nodeOf.size()); }
  int nodes() const { return static_cast<int>(members.size()); }
  int nodeSize(int node) const { return static_cast<int>(members[node].size()); }
  int largestNode() const { return largest_; }
  // Whether a hierarchical plan differs from a flat one: more than one node, and more than
  // one rank in some node.
  bool layered() const { return nodes() > 1 && largestNode() > 1; }
  // The rank of node `node`'s local rank `local`.
  int rankOf(int node, int local) const { return members[node][local]; }
  // Equal on ranks that derived the same topology (part of every call's digest). It and
  // largestNode are made once, by fromHostIds: calls ask for them.
  uint64_t digest() const { return digest_; }
  // "2 nodes of 3+1 ranks".
  std::string describe() const;
};

}  // namespace ccl::coll
