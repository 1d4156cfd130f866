// SPDX-License-Identifier: BSD-3-Clause
// What a call's plan depends on, as the plan caches of ccl's API (host and device paths) and
// of the NCCL face's compressed runner key their plans: one key, one digest of a codec's
// parameters, one bounded cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <unordered_map>
#include <utility>

#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "common/hash.h"

namespace ccl::coll {

struct CallKey {
  int kind;  // the operation (api's op kinds; the face uses the same)
  size_t count;
  int dtype;
  int op;
  int root;  // or the peer of a send/recv
  bool inPlace;
  uint64_t codec;          // codecKey(): 0 uncompressed
  uint8_t misaligned = 0;  // CollArgs::misaligned: buffers staged through aligned scratch
  bool operator==(const CallKey&) const = default;
  // The key of a call of `kind` (count, type, op, root, in place, codec, staging) as its
  // arguments say: the one way the API's caches key a collective.
  static CallKey of(int kind, const CollArgs& a);
};

// The codec field of a shape whose codec the cost model chooses (CCL_CODEC=auto): codecKey()
// is 0 or odd, so 2 is no call's own codec.
inline constexpr uint64_t kAutoCodecKey = 2;

// What the ranks must agree on about a call's codec (error feedback is each rank's own).
uint64_t codecDigest(const codec::Params& p);

// The codec parameters and whether feedback is kept: 0 for an uncompressed call.
uint64_t codecKey(const CollArgs& a);

struct CallKeyHash {
  size_t operator()(const CallKey& k) const;
};

// Plans (or anything made per call shape) by CallKey, at most kMaxEntries: when full it is
// emptied, so a program that varies its sizes without end cannot grow it; what a call in
// flight uses, it holds a copy (or shared pointer) of.
template <class V>
class PlanCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  template <class Make>
  const V& get(const CallKey& key, Make&& make) {
    if (auto it = map_.find(key); it != map_.end()) return it->second;
    if (map_.size() >= kMaxEntries) map_.clear();
    return map_.emplace(key, make()).first->second;
  }
  size_t size() const { return map_.size(); }
  void clear() { map_.clear(); }

 private:
  std::unordered_map<CallKey, V, CallKeyHash> map_;
};

}  // namespace ccl::coll
