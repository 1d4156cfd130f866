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
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "site_codec.h"
#include "sites.h"
#include "timeline.h"

namespace gpt {

struct SiteStats {
  unsigned long long calls = 0;
  unsigned long long rawBytes = 0;
  unsigned long long wireBytes = 0;
  double seconds = 0;
  double codecSeconds = 0;
};

// Every rank's counters (Comm::counters), gathered at rank 0 (empty elsewhere), and where
// each rank sits: [rank][site][layer + 1].
struct GridCounters {
  int ranks = 0, layers = 0;
  std::vector<SiteStats> values;
  std::vector<int> stageOf;  // per rank
  const SiteStats& at(int rank, int site, int slot) const {
    return values[(static_cast<size_t>(rank) * static_cast<size_t>(Site::kCount) + static_cast<size_t>(site)) *
                      static_cast<size_t>(layers + 1) +
                  static_cast<size_t>(slot)];
  }
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
  size_t cols = 0;  // the matrix's row length, for a low-rank codec (0: not a matrix)
};

// A ccl call of the trainer failed: what --elastic goes on after.
struct CommError : std::runtime_error {
  CommError(const std::string& what, cclResult_t code) : std::runtime_error(what), code(code) {}
  cclResult_t code;
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
  // Where this rank's calls are made: its pipeline stage, and the step now running (codecs
  // apply after their warm-up, to their stages and blocks).
  void setStage(int stage) { stage_ = stage; }
  void setStep(int step) { step_ = step; }
  void setTimeline(Timeline* t) { timeline_ = t; }
  // Whether site s's codec applies to this rank's calls now (its stage, after the warm-up).
  bool compresses(Site s) const;
  // While on, every call is counted under Site::kEval (validation), whatever site it names.
  void setEvaluating(bool on) { evaluating_ = on; }
  // While on, every compressed allReduce also runs uncompressed on a copy of its input, and
  // what the codec changed is noted per (site, block): see codecErrors().
  void setErrorSampling(bool on) { sampling_ = on; }
  // Per (site, layer + 1), kErrorFields sums over the sampled calls. Allreduce: calls, the
  // relative error ||y' - y|| / ||y|| of each call's result y', and the median over its
  // elements of |y'_i - y_i| / |y_i| (y the uncompressed result). Pipeline sends with
  // powersgd and error feedback, in the slot of the sending stage: sends, sum ||memory||^2
  // and sum ||memory|| / ||G|| (the sender's kept error against its gradient), and the
  // receiver's sum ||G'||^2: G' = P Q^T and the memory are orthogonal parts of what was
  // encoded, so sum ||G'||^2 / (sum ||G'||^2 + sum ||memory||^2) is the captured energy.
  static constexpr size_t kErrorFields = 7;
  enum ErrorField { kCalls, kRelL2, kMedianRel, kSends, kMemory2, kMemoryOverGrad, kReceived2 };
  std::vector<double>& codecErrors() { return errors_; }

  // `tensor` names the buffer within the site: error feedback is kept per (site, tensor).
  // `layer` is the block a tensor-parallel call belongs to (-1: none). `cols` is the row
  // length of the matrix the buffer holds: a low-rank codec (powersgd) compresses only calls
  // that give one. Each throws std::runtime_error naming the site, the call and ccl's
  // message on failure.
  // `rawScale`: the buffer stands for one rawScale times larger (a learned code): its raw
  // bytes are counted so.
  void allReduce(Site s, int tensor, float* buf, size_t count, cclRedOp_t op, int layer = -1, size_t cols = 0,
                 double rawScale = 1.0);
  void reduceScatter(Site s, int tensor, const float* send, float* recv, size_t recvCount, cclRedOp_t op,
                     int layer = -1);
  void allGather(Site s, int tensor, const float* send, float* recv, size_t sendCount, int layer = -1);
  // As allReduce, asynchronously: enqueued on a host stream of this layer's own (one per
  // site) and returned from at once, so the caller computes while it runs. `buf` must stay
  // untouched until wait(s). Its bytes and seconds are counted at wait(s): the seconds are
  // the time the caller waited, what the overlap did not hide.
  void allReduceAsync(Site s, int tensor, float* buf, size_t count, cclRedOp_t op, int layer = -1);
  // Waits for site s's asynchronous calls; throws like the blocking calls when one failed.
  void wait(Site s);
  // Whether site s has asynchronous calls that no wait(s) has waited for yet.
  bool pending(Site s) const { return pending_[static_cast<size_t>(s)].calls > 0; }

  // Sends and receives that depend on each other, in one group.
  void exchange(const std::vector<PeerTransfer>& transfers);
  // Uncompressed, on the site's communicator: small vectors of doubles (losses, norms).
  void allReduceDoubles(Site s, double* buf, size_t count, cclRedOp_t op);
  // Uncompressed: sum of every rank's `send` at rank 0 of the site's communicator.
  void reduceToRoot(Site s, const float* send, float* recv, size_t count);
  // Uncompressed: every rank's `bytes` bytes at rank 0, by rank.
  void gatherToRoot(Site s, const void* send, void* recv, size_t bytes);
  // Uncompressed, whatever the site's codec: `send` to the previous rank of the site's group
  // (in ring order) and `recv` from the next, `count` floats each way.
  void passDown(Site s, const float* send, float* recv, size_t count);

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
  void run(Site s, const char* what, int layer, Call call, int microbatch = -1, int phase = -1, double rawScale = 1.0);
  // The codec of a call of site s over `count` elements (a matrix of rows of `cols`, or 0)
  // at block `layer` (tp sites) or from sending stage `stage` in pipeline phase `phase` (pp
  // sites): false when the call goes uncompressed.
  struct CallCodec {
    Site site;
    size_t count;
    size_t cols = 0;
    int layer = -1, stage = -1, phase = -1;
    bool allReduce = false;  // a blocking allReduce: the only call scale=channel can transpose
  };
  bool codecFor(const CallCodec& call, cclCompression_t* out) const;
  cclFeedback_t feedbackFor(Site s, int tensor, bool compressed);
  cclComm_t comm(Site s) const;
  SiteStats& slot(Site s, int layer);

  std::array<cclComm_t, static_cast<size_t>(Group::kCount)> comms_{};
  std::array<int, static_cast<size_t>(Group::kCount)> ranks_{}, sizes_{};
  int layers_ = 0;
  bool aborted_ = false;
  bool evaluating_ = false;
  int stage_ = 0, step_ = 0;
  Timeline* timeline_ = nullptr;
  std::array<SiteCodec, static_cast<size_t>(Site::kCount)> codecs_{};
  std::vector<SiteStats> stats_;  // (site, layer + 1)
  bool sampling_ = false;
  std::vector<double> errors_;                 // (site, layer + 1) x kErrorFields
  std::vector<float> transposed_, reference_;  // scale=channel's copy; a sampled call's exact result
  void noteError(Site s, int layer, const float* got, const float* exact, size_t count);
  std::map<std::pair<int, int>, cclFeedback_t> feedback_;
  // Per site: the host stream of its asynchronous calls, how many are queued, and the
  // communicator's counters when the first was enqueued.
  struct Pending {
    cclStream_t stream = nullptr;
    unsigned long long calls = 0, raw = 0, wire = 0;
    double codecSeconds = 0, enqueued = 0;
  };
  std::array<Pending, static_cast<size_t>(Site::kCount)> pending_{};
};

}  // namespace gpt
