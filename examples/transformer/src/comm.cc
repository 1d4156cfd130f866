// SPDX-License-Identifier: BSD-3-Clause
#include "comm.h"

#include <chrono>
#include <stdexcept>

namespace gpt {

const char* siteName(Site s) {
  switch (s) {
    case Site::kDpGrad:
      return "dp.grad";
    case Site::kDpParam:
      return "dp.param";
    case Site::kDpStat:
      return "dp.stat";
    case Site::kCount:
      break;
  }
  return "?";
}

namespace {

void check(cclResult_t r, const char* what, cclComm_t comm) {
  if (r != cclSuccess)
    throw std::runtime_error(std::string(what) + " failed: " + cclGetErrorString(r) + ": " + cclGetLastError(comm));
}

// Bytes this rank has sent, raw and on the wire, over every kind of operation.
std::pair<unsigned long long, unsigned long long> sentBytes(cclComm_t comm) {
  cclStats_t s = CCL_STATS_INITIALIZER;
  check(cclCommGetStats(comm, &s), "cclCommGetStats", comm);
  unsigned long long raw = 0, wire = 0;
  for (const cclOpStats_t& op : s.op) raw += op.rawBytes, wire += op.wireBytes;
  return {raw, wire};
}

}  // namespace

Comm::Comm(cclComm_t comm) : comm_(comm) {
  check(cclCommUserRank(comm, &rank_), "cclCommUserRank", comm);
  check(cclCommCount(comm, &size_), "cclCommCount", comm);
}

Comm::~Comm() {
  for (auto& [key, fb] : feedback_) cclFeedbackDestroy(fb);
}

void Comm::setCodec(Site s, const SiteCodec& codec) { codecs_[static_cast<size_t>(s)] = codec; }

const cclCompression_t* Comm::codecFor(Site s) const {
  const SiteCodec& c = codecs_[static_cast<size_t>(s)];
  return c.compression.codec == cclCodecNone ? nullptr : &c.compression;
}

cclFeedback_t Comm::feedbackFor(Site s, int tensor) {
  const SiteCodec& c = codecs_[static_cast<size_t>(s)];
  if (c.compression.codec == cclCodecNone || c.feedback == cclFeedbackNone) return nullptr;
  cclFeedback_t& fb = feedback_[{static_cast<int>(s), tensor}];
  if (!fb) check(cclFeedbackCreate(&fb, c.feedback, c.locoBeta, c.locoReset), "cclFeedbackCreate", comm_);
  return fb;
}

template <class Call>
void Comm::run(Site s, const char* what, Call call) {
  const auto before = sentBytes(comm_);
  const auto t0 = std::chrono::steady_clock::now();
  check(call(), what, comm_);
  const auto after = sentBytes(comm_);
  SiteStats& st = stats_[static_cast<size_t>(s)];
  st.calls += 1;
  st.rawBytes += after.first - before.first;
  st.wireBytes += after.second - before.second;
  st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Comm::allReduce(Site s, int tensor, float* buf, size_t count, cclRedOp_t op) {
  const cclCompression_t* z = codecFor(s);
  cclFeedback_t fb = feedbackFor(s, tensor);
  run(s, "cclAllReduceEx", [&] { return cclAllReduceEx(buf, buf, count, cclFloat32, op, comm_, nullptr, z, fb); });
}

void Comm::reduceScatter(Site s, int tensor, const float* send, float* recv, size_t recvCount, cclRedOp_t op) {
  const cclCompression_t* z = codecFor(s);
  cclFeedback_t fb = feedbackFor(s, tensor);
  run(s, "cclReduceScatterEx",
      [&] { return cclReduceScatterEx(send, recv, recvCount, cclFloat32, op, comm_, nullptr, z, fb); });
}

void Comm::allGather(Site s, int tensor, const float* send, float* recv, size_t sendCount) {
  const cclCompression_t* z = codecFor(s);
  cclFeedback_t fb = feedbackFor(s, tensor);
  run(s, "cclAllGatherEx", [&] { return cclAllGatherEx(send, recv, sendCount, cclFloat32, comm_, nullptr, z, fb); });
}

void Comm::allReduceDoubles(Site s, double* buf, size_t count, cclRedOp_t op) {
  run(s, "cclAllReduce", [&] { return cclAllReduce(buf, buf, count, cclFloat64, op, comm_, nullptr); });
}

}  // namespace gpt
