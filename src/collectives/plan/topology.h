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
  bool uniform_ = true;                   // every node of one size (uniform())

  // One node per distinct identity (ids[r]: rank r's host identity).
  static Topology fromHostIds(std::span<const uint64_t> ids);
  // `nranks` ranks in nodes of the given sizes, consecutive ranks together.
  static Topology blocks(std::span<const int> nodeSizes);

  int nranks() const { return static_cast<int>(nodeOf.size()); }
  int nodes() const { return static_cast<int>(members.size()); }
  int nodeSize(int node) const { return static_cast<int>(members[node].size()); }
  int largestNode() const { return largest_; }
  // Whether every node has as many ranks as the first.
  bool uniform() const { return uniform_; }
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

// A group of shifts of a communicator's ranks under which a call's plans are the same: rank
// (block b, offset o)'s plan is rank (b', o)'s with every peer (c, q) moved to (c + b - b', q),
// blocks counted modulo `blocks`, tags and step structure unchanged. Blocks of one rank are the
// rotations of a ring (a flat ring's plans); blocks that are nodes shift whole nodes (a
// hierarchical plan on nodes of one size). The wave schedule (stream_executor.h) then reads
// the plans of one block only. One block of every rank is no symmetry at all.
struct Shifts {
  int blocks = 1;
  int size = 1;                    // ranks per block
  const Topology* topo = nullptr;  // blocks are its nodes (uniform); null: `size` consecutive ranks
  // How blocks shift: by a rotation (block b to b + k), or by XOR (b to b ^ k; `blocks` a power
  // of two), as recursive doubling's plans do, where rank r's partners are r ^ 2^i.
  bool xorBlocks = false;

  static Shifts none(int nranks) { return {1, nranks, nullptr}; }
  static Shifts ranks(int nranks) { return {nranks, 1, nullptr}; }
  static Shifts nodes(const Topology& t) { return {t.nodes(), t.nodeSize(0), &t}; }

  int nranks() const { return blocks * size; }
  int blockOf(int r) const { return topo ? topo->nodeOf[static_cast<size_t>(r)] : r / size; }
  int offsetOf(int r) const { return topo ? topo->localRank[static_cast<size_t>(r)] : r % size; }
  int rankAt(int block, int offset) const { return topo ? topo->rankOf(block, offset) : block * size + offset; }
  // What block `home` sends to block c, shifted so that c lands on home, comes from this block.
  int sourceOf(int home, int c) const { return xorBlocks ? c : ((2 * home - c) % blocks + blocks) % blocks; }
};

}  // namespace ccl::coll
