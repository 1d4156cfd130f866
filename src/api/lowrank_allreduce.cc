// SPDX-License-Identifier: BSD-3-Clause
#include "api/lowrank_allreduce.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "api/comm.h"
#include "codecs/elements.h"
#include "codecs/lowrank.h"
#include "common/dtype.h"

namespace ccl::api {
namespace {

// Bytes this rank would send in the uncompressed allreduce of `args` (its plan's sends).
unsigned long long rawBytesOf(coll::CollArgs args) {
  args.codec = codec::Params{};
  args.feedback = false;
  unsigned long long bytes = 0;
  for (const coll::Step& s : coll::planAllReduce(args).steps)
    if (s.kind == coll::StepKind::kSend) bytes += s.rawBytes ? s.rawBytes : s.bytes;
  return bytes;
}

using Clock = std::chrono::steady_clock;

}  // namespace

void lowRankAllReduce(const LowRankCall& c, const coll::CollArgs& args) {
  const size_t n = c.count;
  if (n == 0) return;
  const codec::LowRankShape s = codec::lowRankShape(c.codec, n);
  const uint32_t r = s.rank;
  const cclOpStats_t before = [&] {
    std::lock_guard<std::mutex> lock(c.comm->statsMutex);
    return c.comm->stats[cclOpAllReduce];
  }();
  double codecSeconds = 0;
  auto timed = [&](auto&& f) {
    const auto t0 = Clock::now();
    f();
    codecSeconds += std::chrono::duration<double>(Clock::now() - t0).count();
  };

  float* feedback = c.feedback ? c.feedback->prepare(cclOpAllReduce, codec::residualFloats(c.codec, n)) : nullptr;
  const codec::lowrank::State state = feedback ? codec::lowrank::stateOf(feedback, n, s) : codec::lowrank::State{};
  std::vector<float> m(s.rows * s.cols, 0.0f), q(s.cols * r), p(s.rows * r);
  timed([&] {
    codec::withElementType(c.dtype, [&](auto tag) {
      using T = decltype(tag);
      const auto* x = static_cast<const typename T::Storage*>(c.send);
      for (size_t i = 0; i < n; ++i) m[i] = feedback ? T::load(x, i) + state.residual[i] : T::load(x, i);
    });
    // Every rank starts from the same Q: the seed's, or the sum the previous call agreed on.
    if (feedback && *state.set == 1.0f)
      std::memcpy(q.data(), state.q, q.size() * sizeof(float));
    else
      codec::lowrank::initialQ(c.codec.seed, s.cols, r, q.data());
    codec::lowrank::project(m.data(), s.rows, s.cols, q.data(), r, p.data());
  });
  allReduceFloats(c.comm, p.data(), p.size());
  timed([&] {
    codec::lowrank::orthonormalize(p.data(), s.rows, r);
    codec::lowrank::projectBack(m.data(), s.rows, s.cols, p.data(), r, q.data());
    if (feedback) {
      // This rank's own loss, M_i - P Q_i^T, before Q is summed.
      codec::lowrank::expand(p.data(), q.data(), s.cols, r, n, -1.0f, false, state.residual);
      for (size_t i = 0; i < n; ++i) state.residual[i] += m[i];
    }
  });
  allReduceFloats(c.comm, q.data(), q.size());
  timed([&] {
    const float scale = c.op == cclAvg ? 1.0f / static_cast<float>(c.comm->nranks) : 1.0f;
    std::vector<float> y(n);
    codec::lowrank::expand(p.data(), q.data(), s.cols, r, n, scale, false, y.data());
    codec::withElementType(c.dtype, [&](auto tag) {
      using T = decltype(tag);
      auto* out = static_cast<typename T::Storage*>(c.recv);
      for (size_t i = 0; i < n; ++i) T::store(out, i, y[i]);
    });
    if (feedback) {
      std::memcpy(state.q, q.data(), q.size() * sizeof(float));
      *state.set = 1.0f;
    }
  });
  if (c.feedback) c.feedback->finish();
  // One compressed allreduce in the counters, in place of the two small ones.
  std::lock_guard<std::mutex> lock(c.comm->statsMutex);
  cclOpStats_t& st = c.comm->stats[cclOpAllReduce];
  st.calls = before.calls + 1;
  st.compressedCalls = before.compressedCalls + 1;
  st.rawBytes = before.rawBytes + rawBytesOf(args);
  st.codecSeconds += codecSeconds;
}

}  // namespace ccl::api
