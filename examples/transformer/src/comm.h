// SPDX-License-Identifier: BSD-3-Clause
// The trainer's one communication layer: every collective names its site, the site decides
// the codec and error feedback it carries, and raw bytes, wire bytes and seconds are
// counted per site (from cclCommGetStats before and after each call). Compression research
// lives here and in the schedule, never in the model's math.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "ccl/ccl.h"

namespace gpt {

// The sites data parallelism has; model parallelism adds its own (tp.fwd, pp.fwd, ...).
enum class Site { kDpGrad, kDpParam, kDpStat, kCount };
const char* siteName(Site s);

struct SiteStats {
  unsigned long long calls = 0;
  unsigned long long rawBytes = 0;
  unsigned long long wireBytes = 0;
  double seconds = 0;
};

// What a site carries: a codec (none: uncompressed) and an error-feedback kind.
struct SiteCodec {
  cclCompression_t compression = CCL_COMPRESSION_INITIALIZER;
  cclFeedbackKind_t feedback = cclFeedbackNone;
  float locoBeta = 0.5f;
  int locoReset = 0;
};

class Comm {
 public:
  explicit Comm(cclComm_t comm);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  cclComm_t handle() const { return comm_; }

  void setCodec(Site s, const SiteCodec& codec);

  // `tensor` names the buffer within the site (a bucket): error feedback is kept per
  // (site, tensor). Each throws std::runtime_error with ccl's message on failure.
  void allReduce(Site s, int tensor, float* buf, size_t count, cclRedOp_t op);
  void reduceScatter(Site s, int tensor, const float* send, float* recv, size_t recvCount, cclRedOp_t op);
  void allGather(Site s, int tensor, const float* send, float* recv, size_t sendCount);
  // Uncompressed scalars and small vectors of doubles (losses, norms).
  void allReduceDoubles(Site s, double* buf, size_t count, cclRedOp_t op);

  const SiteStats& stats(Site s) const { return stats_[static_cast<size_t>(s)]; }

 private:
  template <class Call>
  void run(Site s, const char* what, Call call);
  cclFeedback_t feedbackFor(Site s, int tensor);
  const cclCompression_t* codecFor(Site s) const;

  cclComm_t comm_;
  int rank_ = 0, size_ = 1;
  std::array<SiteCodec, static_cast<size_t>(Site::kCount)> codecs_{};
  std::array<SiteStats, static_cast<size_t>(Site::kCount)> stats_{};
  std::map<std::pair<int, int>, cclFeedback_t> feedback_;
};

}  // namespace gpt
