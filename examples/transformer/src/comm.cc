// SPDX-License-Identifier: BSD-3-Clause
#include "comm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace gpt {

bool siteFromName(const std::string& name, Site* out) {
  for (const SiteInfo& s : kSites)
    if (name == s.name) {
      *out = s.site;
      return true;
    }
  return false;
}

namespace {

void check(cclResult_t r, const std::string& what, cclComm_t comm) {
  if (r != cclSuccess) throw CommError(what + " failed: " + cclGetErrorString(r) + ": " + cclGetLastError(comm), r);
}

struct Sent {
  unsigned long long raw = 0, wire = 0;
  double codecSeconds = 0;
};

// What this rank has sent on `comm`, raw and on the wire, and the codec time, over every
// kind of operation.
Sent sentOn(cclComm_t comm) {
  cclStats_t s = CCL_STATS_INITIALIZER;
  check(cclCommGetStats(comm, &s), "cclCommGetStats", comm);
  Sent out;
  for (const cclOpStats_t& op : s.op) {
    out.raw += op.rawBytes;
    out.wire += op.wireBytes;
    out.codecSeconds += op.codecSeconds;
  }
  return out;
}

}  // namespace

Comm::Comm(const std::array<cclComm_t, static_cast<size_t>(Group::kCount)>& comms, int layers)
    : comms_(comms), layers_(layers) {
  stats_.resize(static_cast<size_t>(Site::kCount) * static_cast<size_t>(layers + 1));
  errors_.assign(stats_.size() * kErrorFields, 0.0);
  for (size_t g = 0; g < comms_.size(); ++g) {
    ranks_[g] = 0;
    sizes_[g] = 1;
    if (!comms_[g]) continue;
    check(cclCommUserRank(comms_[g], &ranks_[g]), "cclCommUserRank", comms_[g]);
    check(cclCommCount(comms_[g], &sizes_[g]), "cclCommCount", comms_[g]);
  }
}

Comm::~Comm() {
  // The queued calls end (or fail promptly after an abort) before their feedback goes.
  for (Pending& p : pending_)
    if (p.stream) cclHostStreamDestroy(p.stream);
  for (auto& [key, fb] : feedback_) cclFeedbackDestroy(fb);
  if (aborted_) return;
  for (size_t g = 0; g < comms_.size(); ++g)
    if (comms_[g] && g != static_cast<size_t>(Group::kWorld)) cclCommDestroy(comms_[g]);
}

void Comm::abort() {
  if (aborted_) return;
  aborted_ = true;
  for (size_t g = 0; g < comms_.size(); ++g)
    if (comms_[g] && g != static_cast<size_t>(Group::kWorld)) cclCommAbort(comms_[g]);
}

void Comm::setCodec(Site s, const SiteCodec& codec) { codecs_[static_cast<size_t>(s)] = codec; }

bool Comm::codecFor(const CallCodec& call, cclCompression_t* out) const {
  const SiteCodec& c = codecs_[static_cast<size_t>(call.site)];
  const Scope scope = siteInfo(call.site).scope;
  const CallPlace at{step_, scope == Scope::kLayers ? call.layer : -1,
                     scope == Scope::kStages ? (call.stage >= 0 ? call.stage : stage_) : -1, call.phase};
  if (!applies(c, at)) return false;
  if (c.channelScales && !call.allReduce)
    throw std::runtime_error(std::string(siteName(call.site)) +
                             " scale=channel: only blocking allreduce calls travel transposed (not this layout's "
                             "reduce-scatter, all-gather, asynchronous or point-to-point calls)");
  *out = c.compression;
  if (out->codec == cclCodecPowerSgd) {
    if (call.cols == 0 || call.count % call.cols != 0) return false;  // not a matrix
    out->cols = call.cols;
    out->rows = call.count / call.cols;
  }
  return true;
}

bool Comm::compresses(Site s) const {
  const bool staged = siteInfo(s).scope == Scope::kStages;
  return applies(codecs_[static_cast<size_t>(s)], {step_, -1, staged ? stage_ : -1, -1});
}

cclFeedback_t Comm::feedbackFor(Site s, int tensor, bool compressed) {
  const SiteCodec& c = codecs_[static_cast<size_t>(s)];
  // warmstart=on without error feedback: a state of kind none keeps powersgd's warm start.
  if (!compressed || (c.feedback == cclFeedbackNone && !c.warmStartOnly)) return nullptr;
  cclFeedback_t& fb = feedback_[{static_cast<int>(s), tensor}];
  if (!fb) check(cclFeedbackCreate(&fb, c.feedback, c.locoBeta, c.locoReset), "cclFeedbackCreate", comm(s));
  return fb;
}

cclComm_t Comm::comm(Site s) const {
  cclComm_t c = comms_[static_cast<size_t>(siteInfo(s).group)];
  if (!c) throw std::logic_error(std::string("site ") + siteName(s) + " used by a rank outside its group");
  return c;
}

SiteStats& Comm::slot(Site s, int layer) {
  const int index = layer >= 0 && layer < layers_ ? layer + 1 : 0;
  return stats_[static_cast<size_t>(s) * static_cast<size_t>(layers_ + 1) + static_cast<size_t>(index)];
}

SiteStats Comm::stats(Site s, int layer) const {
  const size_t row = static_cast<size_t>(s) * static_cast<size_t>(layers_ + 1);
  if (layer >= 0) return layer < layers_ ? stats_[row + static_cast<size_t>(layer) + 1] : SiteStats{};
  SiteStats sum;
  for (int i = 0; i <= layers_; ++i) {
    const SiteStats& st = stats_[row + static_cast<size_t>(i)];
    sum.calls += st.calls;
    sum.rawBytes += st.rawBytes;
    sum.wireBytes += st.wireBytes;
    sum.seconds += st.seconds;
    sum.codecSeconds += st.codecSeconds;
  }
  return sum;
}

template <class Call>
void Comm::run(Site s, const char* what, int layer, Call call, int microbatch, int phase, double rawScale) {
  cclComm_t c = comm(s);
  const Sent before = sentOn(c);
  const double t0 = Timeline::now();
  const cclResult_t r = call(c);
  if (r != cclSuccess) {
    std::string where = std::string(siteName(s)) + " " + what;
    if (layer >= 0) where += " (block " + std::to_string(layer) + ")";
    if (microbatch >= 0) where += " (micro-batch " + std::to_string(microbatch) + ")";
    check(r, where, c);
  }
  const double t1 = Timeline::now();
  const Sent after = sentOn(c);
  const Site counted = evaluating_ ? Site::kEval : s;
  SiteStats& st = slot(counted, layer);
  st.calls += 1;
  st.rawBytes += static_cast<unsigned long long>(static_cast<double>(after.raw - before.raw) * rawScale);
  st.wireBytes += after.wire - before.wire;
  st.seconds += t1 - t0;
  const double codec = after.codecSeconds - before.codecSeconds;
  st.codecSeconds += codec;
  if (timeline_ && timeline_->recording()) {
    const int32_t site = static_cast<int32_t>(counted);
    timeline_->add({t0, t1, SpanKind::kComm, site, microbatch, layer, 0, phase});
    // ccl reports a call's codec time, not when it ran: the span starts with the call.
    if (codec > 0) timeline_->add({t0, t0 + codec, SpanKind::kCodec, site, microbatch, layer, 0, phase});
  }
}

namespace {

// out (cols x rows) = in (rows x cols) transposed.
void transpose(const float* in, size_t rows, size_t cols, float* out) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

}  // namespace

void Comm::allReduce(Site s, int tensor, float* buf, size_t count, cclRedOp_t op, int layer, size_t cols,
                     double rawScale) {
  cclCompression_t z;
  const bool on = codecFor({s, count, cols, layer, -1, -1, true}, &z);
  cclFeedback_t fb = feedbackFor(s, tensor, on);
  // scale=channel: the tokens x channels matrix travels transposed, so a block of `rows`
  // elements is one channel over every token of the call.
  float* data = buf;
  const bool channels = on && codecs_[static_cast<size_t>(s)].channelScales;
  const size_t rows = cols ? count / cols : 0;
  if (channels) {
    if (cols == 0 || count % cols != 0 || rows % 8 != 0 || rows > 65536)
      throw std::runtime_error(std::string(siteName(s)) + " scale=channel: the call is " + std::to_string(count) +
                               " elements of rows of " + std::to_string(cols) +
                               "; it needs a matrix of a multiple of 8 rows, at most 65536");
    transposed_.resize(count);
    transpose(buf, rows, cols, transposed_.data());
    z.blockSize = static_cast<int>(rows);
    data = transposed_.data();
  }
  const bool sample = on && sampling_ && !evaluating_;
  if (sample) {
    reference_.assign(data, data + count);
    const cclCompression_t none = CCL_COMPRESSION_INITIALIZER;
    check(cclAllReduceEx(reference_.data(), reference_.data(), count, cclFloat32, op, comm(s), nullptr, &none, nullptr),
          std::string(siteName(s)) + " uncompressed reference of a sampled call", comm(s));
  }
  run(
      s, "cclAllReduceEx", layer,
      [&](cclComm_t c) { return cclAllReduceEx(data, data, count, cclFloat32, op, c, nullptr, on ? &z : nullptr, fb); },
      -1, -1, rawScale);
  if (sample) noteError(s, layer, data, reference_.data(), count);
  if (channels) transpose(data, cols, rows, buf);
}

void Comm::noteError(Site s, int layer, const float* got, const float* exact, size_t count) {
  double e2 = 0, y2 = 0;
  std::vector<float> rel(count);
  for (size_t i = 0; i < count; ++i) {
    const double e = static_cast<double>(got[i]) - exact[i];
    e2 += e * e;
    y2 += static_cast<double>(exact[i]) * exact[i];
    const float a = std::fabs(exact[i]);
    rel[i] = a > 0 ? static_cast<float>(std::fabs(e) / a) : e == 0 ? 0.0f : std::numeric_limits<float>::infinity();
  }
  if (count == 0) return;
  std::nth_element(rel.begin(), rel.begin() + static_cast<std::ptrdiff_t>(count / 2), rel.end());
  const size_t at = static_cast<size_t>(&slot(s, layer) - stats_.data()) * kErrorFields;
  errors_[at + kCalls] += 1;
  errors_[at + kRelL2] += y2 > 0 ? std::sqrt(e2 / y2) : 0.0;
  errors_[at + kMedianRel] += rel[count / 2];
}

namespace {

double squares(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace

void Comm::allReduceAsync(Site s, int tensor, float* buf, size_t count, cclRedOp_t op, int layer) {
  cclCompression_t z;
  const bool on = codecFor({s, count, 0, layer}, &z);
  cclFeedback_t fb = feedbackFor(s, tensor, on);
  cclComm_t c = comm(s);
  Pending& p = pending_[static_cast<size_t>(s)];
  if (!p.stream) check(cclHostStreamCreate(&p.stream), "cclHostStreamCreate", c);
  if (p.calls == 0) {
    const Sent before = sentOn(c);
    p.raw = before.raw;
    p.wire = before.wire;
    p.codecSeconds = before.codecSeconds;
    p.enqueued = Timeline::now();
  }
  const cclResult_t r = cclAllReduceEx(buf, buf, count, cclFloat32, op, c, p.stream, on ? &z : nullptr, fb);
  if (r != cclSuccess) {
    std::string where = std::string(siteName(s)) + " cclAllReduceEx (asynchronous)";
    if (layer >= 0) where += " (block " + std::to_string(layer) + ")";
    check(r, where, c);
  }
  ++p.calls;
}

void Comm::wait(Site s) {
  Pending& p = pending_[static_cast<size_t>(s)];
  if (p.calls == 0) return;
  cclComm_t c = comm(s);
  const double t0 = Timeline::now();
  const unsigned long long calls = p.calls;
  p.calls = 0;
  check(cclHostStreamSynchronize(p.stream), std::string(siteName(s)) + " asynchronous cclAllReduceEx", c);
  const double t1 = Timeline::now();
  const Sent after = sentOn(c);
  const Site counted = evaluating_ ? Site::kEval : s;
  SiteStats& st = slot(counted, -1);
  st.calls += calls;
  st.rawBytes += after.raw - p.raw;
  st.wireBytes += after.wire - p.wire;
  st.seconds += t1 - t0;
  st.codecSeconds += after.codecSeconds - p.codecSeconds;
  if (timeline_ && timeline_->recording()) {
    // The calls ran from the first enqueue on; the caller waited only from t0.
    timeline_->add({p.enqueued, t1, SpanKind::kAsync, static_cast<int32_t>(counted), -1, -1, 0, -1});
    timeline_->add({t0, t1, SpanKind::kComm, static_cast<int32_t>(counted), -1, -1, 0, -1});
  }
}

void Comm::reduceScatter(Site s, int tensor, const float* send, float* recv, size_t recvCount, cclRedOp_t op,
                         int layer) {
  cclCompression_t z;
  const bool on = codecFor({s, recvCount, 0, layer}, &z);
  cclFeedback_t fb = feedbackFor(s, tensor, on);
  run(s, "cclReduceScatterEx", layer, [&](cclComm_t c) {
    return cclReduceScatterEx(send, recv, recvCount, cclFloat32, op, c, nullptr, on ? &z : nullptr, fb);
  });
}

void Comm::allGather(Site s, int tensor, const float* send, float* recv, size_t sendCount, int layer) {
  cclCompression_t z;
  const bool on = codecFor({s, sendCount, 0, layer}, &z);
  cclFeedback_t fb = feedbackFor(s, tensor, on);
  run(s, "cclAllGatherEx", layer, [&](cclComm_t c) {
    return cclAllGatherEx(send, recv, sendCount, cclFloat32, c, nullptr, on ? &z : nullptr, fb);
  });
}

void Comm::exchange(const std::vector<PeerTransfer>& transfers) {
  if (transfers.empty()) return;
  // A group's time and bytes go to its send's site (what this rank contributes), else to its
  // receive's.
  const PeerTransfer* lead = &transfers.front();
  for (const PeerTransfer& t : transfers)
    if (t.send) lead = &t;
  for (const PeerTransfer& t : transfers)
    if (siteInfo(t.site).group != Group::kPp) throw std::logic_error("exchange() is for pipeline sites");
  // Sampled steps: what powersgd with error feedback captured, per boundary (codecErrors).
  std::vector<cclFeedback_t> kept(transfers.size(), nullptr);
  std::vector<bool> lowRank(transfers.size(), false);
  run(
      lead->site,
      transfers.size() > 1 ? "cclSend/cclRecv group"
      : lead->send         ? "cclSendEx"
                           : "cclRecvEx",
      -1,
      [&](cclComm_t c) {
        cclResult_t r = cclGroupStart();
        if (r != cclSuccess) return r;
        for (size_t k = 0; k < transfers.size(); ++k) {
          const PeerTransfer& t = transfers[k];
          // Both ends decide by the sending stage (a pipeline rank is its stage) and the phase
          // that produced the data. A sender's feedback is per site and peer: the error of one
          // micro-batch's tensor goes into the next one's (lazy error propagation).
          cclCompression_t z;
          const bool on = codecFor({t.site, t.count, t.cols, -1, t.send ? stage_ : t.peer, t.phase}, &z);
          lowRank[k] = on && z.codec == cclCodecPowerSgd;
          cclFeedback_t fb = t.send ? feedbackFor(t.site, t.peer, on) : nullptr;
          if (codecs_[static_cast<size_t>(t.site)].feedback == cclFeedbackResidual) kept[k] = fb;
          r = t.send ? cclSendEx(t.buf, t.count, cclFloat32, t.peer, c, nullptr, on ? &z : nullptr, fb)
                     : cclRecvEx(t.buf, t.count, cclFloat32, t.peer, c, nullptr, on ? &z : nullptr);
          if (r != cclSuccess) {
            cclGroupEnd();
            return r;
          }
        }
        return cclGroupEnd();
      },
      lead->microbatch, lead->phase);
  if (!sampling_ || evaluating_) return;
  for (size_t k = 0; k < transfers.size(); ++k) {
    const PeerTransfer& t = transfers[k];
    if (!lowRank[k] || (t.send && !kept[k])) continue;
    double* f = &errors_[static_cast<size_t>(&slot(t.site, t.send ? stage_ : t.peer) - stats_.data()) * kErrorFields];
    if (t.send) {
      double memory = 0;
      check(cclFeedbackErrorNorm(kept[k], &memory), "cclFeedbackErrorNorm", comm(t.site));
      const double grad = std::sqrt(squares(t.buf, t.count));
      f[kSends] += 1;
      f[kMemory2] += memory * memory;
      f[kMemoryOverGrad] += grad > 0 ? memory / grad : 0.0;
    } else {
      f[kReceived2] += squares(t.buf, t.count);
    }
  }
}

void Comm::allReduceDoubles(Site s, double* buf, size_t count, cclRedOp_t op) {
  run(s, "cclAllReduce", -1, [&](cclComm_t c) { return cclAllReduce(buf, buf, count, cclFloat64, op, c, nullptr); });
}

void Comm::reduceToRoot(Site s, const float* send, float* recv, size_t count) {
  run(s, "cclReduce", -1, [&](cclComm_t c) { return cclReduce(send, recv, count, cclFloat32, cclSum, 0, c, nullptr); });
}

void Comm::gatherToRoot(Site s, const void* send, void* recv, size_t bytes) {
  run(s, "cclGather", -1, [&](cclComm_t c) { return cclGather(send, recv, bytes, cclUint8, 0, c, nullptr); });
}

void Comm::passDown(Site s, const float* send, float* recv, size_t count) {
  const int n = size(siteInfo(s).group), me = rank(siteInfo(s).group);
  if (n == 1) {
    std::copy(send, send + count, recv);
    return;
  }
  const cclCompression_t exact = CCL_COMPRESSION_INITIALIZER;
  run(s, "cclSend/cclRecv group", -1, [&](cclComm_t c) {
    cclResult_t r = cclGroupStart();
    if (r != cclSuccess) return r;
    r = cclSendEx(send, count, cclFloat32, (me + n - 1) % n, c, nullptr, &exact, nullptr);
    if (r == cclSuccess) r = cclRecvEx(recv, count, cclFloat32, (me + 1) % n, c, nullptr, &exact);
    const cclResult_t end = cclGroupEnd();
    return r != cclSuccess ? r : end;
  });
}

}  // namespace gpt
