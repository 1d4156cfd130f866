// SPDX-License-Identifier: BSD-3-Clause
// The trainer's one communication layer: every collective names its site, the site decides
// the communicator (the rank's tensor-, pipeline- or data-parallel group, the tied-embedding
// pair or the whole world), the codec and the error feedback it carries, and calls, raw
// bytes, wire bytes and seconds are counted per site and per block (from cclCommGetStats
// before and after each call). Compression research lives here and in the schedule, never in
// the model's math.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "timeline.h"

namespace gpt {

// The communicators of a rank (grid.h makes them).
enum class Group { kWorld, kTp, kPp, kDp, kEmb, kCount };

enum class Site { kTpFwd, kTpBwd, kTpGrad, kPpFwd, kPpBwd, kDpGrad, kDpParam, kEmbSync, kStat, kEval, kCount };

struct SiteInfo {
  Site site;
  const char* name;
  Group group;
  const char* what;
};

// Every site, in Site order: its name in logs, flags and traces, its communicator, and what
// it carries.
inline constexpr SiteInfo kSites[] = {
    {Site::kTpFwd, "tp.fwd", Group::kTp,
     "forward: each row-parallel layer's output summed (all-reduce; sequence parallel: reduce-scatter) and, with "
     "sequence parallelism, each column-parallel layer's input all-gathered"},
    {Site::kTpBwd, "tp.bwd", Group::kTp,
     "backward: each column-parallel layer's input gradient summed (all-reduce; sequence parallel: reduce-scatter) "
     "and, with sequence parallelism, each row-parallel layer's output gradient all-gathered"},
    {Site::kTpGrad, "tp.grad", Group::kTp,
     "sequence parallel: the gradients of the tensors every tensor-parallel rank holds whole (LayerNorms, "
     "row-parallel biases, embeddings), summed over the group once per step"},
    {Site::kPpFwd, "pp.fwd", Group::kPp, "activations sent to the next pipeline stage"},
    {Site::kPpBwd, "pp.bwd", Group::kPp, "activation gradients sent to the previous pipeline stage"},
    {Site::kDpGrad, "dp.grad", Group::kDp,
     "gradients averaged over the data-parallel group (all-reduce in buckets; ZeRO-1: reduce-scatter)"},
    {Site::kDpParam, "dp.param", Group::kDp,
     "ZeRO-1: updated parameters (and, for checkpoints, AdamW state) all-gathered"},
    {Site::kEmbSync, "emb.sync", Group::kEmb, "wte's gradient summed between the first and the last pipeline stage"},
    {Site::kStat, "stat", Group::kWorld, "loss and gradient norm, logs, checkpoints and the trace"},
    {Site::kEval, "eval", Group::kWorld, "validation's tensor- and pipeline-parallel traffic (counted apart)"},
};
static_assert(std::size(kSites) == static_cast<size_t>(Site::kCount));

constexpr const SiteInfo& siteInfo(Site s) { return kSites[static_cast<size_t>(s)]; }
inline const char* siteName(Site s) { return siteInfo(s).name; }
// Site by name (false: no such site).
bool siteFromName(const std::string& name, Site* out);

struct SiteStats {
  unsigned long long calls = 0;
  unsigned long long rawBytes = 0;
  unsigned long long wireBytes = 0;
  double seconds = 0;
  double codecSeconds = 0;
};

// What a site carries: a codec (none: uncompressed) and an error-feedback kind.
struct SiteCodec {
  cclCompression_t compression = CCL_COMPRESSION_INITIALIZER;
  cclFeedbackKind_t feedback = cclFeedbackNone;
  float locoBeta = 0.5f;
  int locoReset = 0;
};

// One send or receive of a group of point-to-point calls.
struct PeerTransfer {
  bool send;
  Site site;
  int peer;  // rank in the site's communicator
  float* buf;
  size_t count;
  int microbatch = -1;
  int phase = -1;
};

class Comm {
 public:
  // `comms[g]` is this rank's communicator of group g (null: the rank is in no such group).
  // The world communicator is borrowed; the others are owned and destroyed here.
  // `layers` sizes the per-block counters.
  Comm(const std::array<cclComm_t, static_cast<size_t>(Group::kCount)>& comms, int layers);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // Rank and size of this rank in group g (0 and 1 when it is in none).
  int rank(Group g) const { return ranks_[static_cast<size_t>(g)]; }
  int size(Group g) const { return sizes_[static_cast<size_t>(g)]; }
  bool has(Group g) const { return comms_[static_cast<size_t>(g)] != nullptr; }

  void setCodec(Site s, const SiteCodec& codec);
  void setTimeline(Timeline* t) { timeline_ = t; }
  // While on, every call is counted under Site::kEval (validation), whatever site it names.
  void setEvaluating(bool on) { evaluating_ = on; }

  // `tensor` names the buffer within the site: error feedback is kept per (site, tensor).
  // `layer` is the block a tensor-parallel call belongs to (-1: none). Each throws
  // std::runtime_error naming the site, the call and ccl's message on failure.
  void allReduce(Site s, int tensor, float* buf, size_t count, cclRedOp_t op, int layer = -1);
  void reduceScatter(Site s, int tensor, const float* send, float* recv, size_t recvCount, cclRedOp_t op,
                     int layer = -1);
  void allGather(Site s, int tensor, const float* send, float* recv, size_t sendCount, int layer = -1);
  // Sends and receives that depend on each other, in one group.
  void exchange(const std::vector<PeerTransfer>& transfers);
  // Uncompressed, on the site's communicator: small vectors of doubles (losses, norms).
  void allReduceDoubles(Site s, double* buf, size_t count, cclRedOp_t op);
  // Uncompressed: sum of every rank's `send` at rank 0 of the site's communicator.
  void reduceToRoot(Site s, const float* send, float* recv, size_t count);
  // Uncompressed: every rank's `bytes` bytes at rank 0, by rank.
  void gatherToRoot(Site s, const void* send, void* recv, size_t bytes);

  // Counters of site s: of block `layer`, or (-1) of every call.
  SiteStats stats(Site s, int layer = -1) const;
  int layers() const { return layers_; }
  // Every counter, [site][layer + 1] (slot 0: calls of no block), for gathering.
  const std::vector<SiteStats>& counters() const { return stats_; }

  // Aborts every communicator this layer owns (after a failure, so that peers blocked in them
  // fail instead of waiting); the destructor then leaves them alone.
  void abort();

 private:
  template <class Call>
  void run(Site s, const char* what, int layer, Call call, int microbatch = -1, int phase = -1);
  cclFeedback_t feedbackFor(Site s, int tensor);
  const cclCompression_t* codecFor(Site s) const;
  cclComm_t comm(Site s) const;
  SiteStats& slot(Site s, int layer);

  std::array<cclComm_t, static_cast<size_t>(Group::kCount)> comms_{};
  std::array<int, static_cast<size_t>(Group::kCount)> ranks_{}, sizes_{};
  int layers_ = 0;
  bool aborted_ = false;
  bool evaluating_ = false;
  Timeline* timeline_ = nullptr;
  std::array<SiteCodec, static_cast<size_t>(Site::kCount)> codecs_{};
  std::vector<SiteStats> stats_;  // (site, layer + 1)
  std::map<std::pair<int, int>, cclFeedback_t> feedback_;
};

}  // namespace gpt
