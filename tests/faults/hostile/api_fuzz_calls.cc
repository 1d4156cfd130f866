// SPDX-License-Identifier: BSD-3-Clause
// One rank's part of a call (its buffers, filled and checked, and the call issued), and steps
// of calls on every rank, judged together.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api_fuzz.h"

namespace apifuzz {

// Buffers start misalignSend/misalignRecv units past their guard, which leaves them off any
// vector alignment. A unit is one element: a buffer that starts inside an element (possible
// for a void* but not for a C array of the type) makes the library's element loops load and
// store through misaligned typed pointers: undefined behaviour that UBSan stops at, which
// ccl.h neither refuses nor promises to support; --misalign bytes exercises it.
bool misalignBytes = false;

namespace {

constexpr size_t kMaxAllocElems = 1 << 17;

size_t misalignUnit(size_t elementSize) { return misalignBytes ? 1 : elementSize; }

Guarded* addBlock(Buffers& b, size_t bytes, size_t shift) {
  b.blocks.push_back(std::make_unique<Guarded>(bytes, shift));
  return b.blocks.back().get();
}

}  // namespace

void build(const Spec& s, int r, int n, Rng& g, Buffers& b) {
  const BaseInfo& info = baseInfo(fnInfo(s.fn).base);
  const size_t es = typeSize(s.dtype) ? typeSize(s.dtype) : 4;
  const size_t count = s.count > kMaxAllocElems ? 16 : s.count;  // overflowing counts are refused unread
  const size_t sendElems = info.send == Ext::kCount ? count : count * n;
  const size_t recvElems = info.recv == Ext::kCount ? count : count * n;
  const size_t sendBytes = sendElems * es, recvBytes = recvElems * es, block = count * es;
  const size_t shiftSend = s.misalignSend * misalignUnit(es), shiftRecv = s.misalignRecv * misalignUnit(es);
  switch (s.layout) {
    case Layout::kSeparate:
    case Layout::kNullSend:
    case Layout::kNullRecv:
      if (s.layout != Layout::kNullSend) b.send = addBlock(b, sendBytes, shiftSend)->data();
      if (s.layout != Layout::kNullRecv) b.recv = addBlock(b, recvBytes, shiftRecv)->data();
      break;
    case Layout::kInPlace: {
      switch (info.inPlace) {
        case InPlace::kSame:
          b.send = b.recv = addBlock(b, std::max(sendBytes, recvBytes), shiftRecv)->data();
          break;
        case InPlace::kSendInRecv:
          b.recv = addBlock(b, recvBytes, shiftRecv)->data();
          b.send = b.recv + static_cast<size_t>(r) * block;
          break;
        case InPlace::kRecvInSend:
          b.send = addBlock(b, sendBytes, shiftSend)->data();
          b.recv = b.send + static_cast<size_t>(r) * block;
          break;
        case InPlace::kNone:
          break;
      }
      break;
    }
    case Layout::kOverlap: {
      // Both in one arena, sharing bytes, but not where the in-place form puts them.
      const size_t arena = sendBytes + recvBytes;
      uint8_t* base = addBlock(b, arena, shiftRecv)->data();
      const long inPlaceDelta = info.inPlace == InPlace::kSendInRecv   ? static_cast<long>(r * block)
                                : info.inPlace == InPlace::kRecvInSend ? -static_cast<long>(r * block)
                                                                       : 0;
      for (;;) {
        const long oRecv = static_cast<long>(g.below(sendBytes + 1));
        const long lo = std::max(0L, oRecv - static_cast<long>(sendBytes) + 1);
        const long hi = std::min(static_cast<long>(arena - sendBytes), oRecv + static_cast<long>(recvBytes) - 1);
        if (hi < lo) continue;
        const long oSend = lo + static_cast<long>(g.below(static_cast<uint64_t>(hi - lo + 1)));
        if (oSend - oRecv == inPlaceDelta) continue;
        b.send = base + oSend;
        b.recv = base + oRecv;
        break;
      }
      break;
    }
  }
  // Receive space first (a recognisable filler), then the send values over it.
  for (auto& blk : b.blocks)
    for (size_t j = 0; j < blk->bytes(); ++j) blk->data()[j] = static_cast<uint8_t>(0xee ^ (j * 7));
  if (b.send)
    for (size_t i = 0; i < sendElems; ++i) put(b.send, s.dtype, i, sendValue(s, r, i));
  for (auto& blk : b.blocks) b.before.emplace_back(blk->data(), blk->data() + blk->bytes());
  b.recvElems = b.recv ? recvElems : 0;
  if (b.recv) b.recvBefore.assign(b.recv, b.recv + recvBytes);
}

std::string guardReport(const Buffers& b, const std::string& what) {
  for (size_t i = 0; i < b.blocks.size(); ++i)
    if (auto at = b.blocks[i]->hit())
      return what + ": a write outside buffer " + std::to_string(i) + " at offset " + std::to_string(*at) +
             " (payload " + std::to_string(b.blocks[i]->bytes()) + " bytes)";
  return "";
}

bool unchanged(const Buffers& b) {
  for (size_t i = 0; i < b.blocks.size(); ++i)
    if (!b.before[i].empty() && std::memcmp(b.blocks[i]->data(), b.before[i].data(), b.before[i].size()) != 0)
      return false;
  return true;
}

namespace {

// The first element of rank r's receive buffer that is not what the call should have left.
std::string checkValues(const Spec& s, const Buffers& b, int r, int n) {
  const size_t es = typeSize(s.dtype);
  for (size_t j = 0; j < b.recvElems; ++j) {
    const std::optional<double> want = expectedAt(s, r, n, j);
    if (!want) {
      if (std::memcmp(b.recv + j * es, b.recvBefore.data() + j * es, es) != 0)
        return "rank " + std::to_string(r) + " element " + std::to_string(j) + " was written, but the call " +
               "writes it only on the root";
      continue;
    }
    const double got = get(b.recv, s.dtype, j);
    const double tol = s.op == cclAvg ? 1e-6 * std::max(1.0, std::fabs(*want)) : 0.0;
    if (!(std::fabs(got - *want) <= tol))
      return "rank " + std::to_string(r) + " element " + std::to_string(j) + " is " + std::to_string(got) +
             ", expected " + std::to_string(*want);
  }
  return "";
}

}  // namespace

cclResult_t first(cclResult_t a, cclResult_t b) { return a != cclSuccess ? a : b; }

cclResult_t issue(const Spec& s, const Buffers& b, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = s.comm == CommKind::kReal ? w.comm[r] : s.comm == CommKind::kNull ? nullptr : garbage();
  cclStream_t st = s.stream == StreamKind::kHost ? w.stream[r] : s.stream == StreamKind::kFake ? fakeStream() : nullptr;
  cclFeedback_t fb = s.feedback >= 0 ? w.feedback[r][s.feedback] : nullptr;
  const cclCompression_t* cmp = s.codecKind == CodecKind::kNull ? nullptr : &s.codec;
  const void* sb = b.send;
  void* rb = b.recv;
  const size_t c = s.count;
  const auto t = static_cast<cclDataType_t>(s.dtype);
  const auto op = static_cast<cclRedOp_t>(s.op);
  const int root = s.root;
  const int to = s.badPeer ? s.badPeer : (r + s.shift) % n;
  const int from = s.badPeer ? s.badPeer : ((r - s.shift) % n + n) % n;
  switch (s.fn) {
    case Fn::kAllReduce:
      return call("cclAllReduce", [&] { return cclAllReduce(sb, rb, c, t, op, comm, st); });
    case Fn::kBroadcast:
      return call("cclBroadcast", [&] { return cclBroadcast(sb, rb, c, t, root, comm, st); });
    case Fn::kBcast:
      return call("cclBcast", [&] { return cclBcast(rb, c, t, root, comm, st); });
    case Fn::kReduce:
      return call("cclReduce", [&] { return cclReduce(sb, rb, c, t, op, root, comm, st); });
    case Fn::kAllGather:
      return call("cclAllGather", [&] { return cclAllGather(sb, rb, c, t, comm, st); });
    case Fn::kReduceScatter:
      return call("cclReduceScatter", [&] { return cclReduceScatter(sb, rb, c, t, op, comm, st); });
    case Fn::kAlltoAll:
      return call("cclAlltoAll", [&] { return cclAlltoAll(sb, rb, c, t, comm, st); });
    case Fn::kGather:
      return call("cclGather", [&] { return cclGather(sb, rb, c, t, root, comm, st); });
    case Fn::kScatter:
      return call("cclScatter", [&] { return cclScatter(sb, rb, c, t, root, comm, st); });
    case Fn::kSendRecv: {
      const cclResult_t a = call("cclSend", [&] { return cclSend(sb, c, t, to, comm, st); });
      return first(a, call("cclRecv", [&] { return cclRecv(rb, c, t, from, comm, st); }));
    }
    case Fn::kAllReduceEx:
      return call("cclAllReduceEx", [&] { return cclAllReduceEx(sb, rb, c, t, op, comm, st, cmp, fb); });
    case Fn::kReduceScatterEx:
      return call("cclReduceScatterEx", [&] { return cclReduceScatterEx(sb, rb, c, t, op, comm, st, cmp, fb); });
    case Fn::kAllGatherEx:
      return call("cclAllGatherEx", [&] { return cclAllGatherEx(sb, rb, c, t, comm, st, cmp, fb); });
    case Fn::kAlltoAllEx:
      return call("cclAlltoAllEx", [&] { return cclAlltoAllEx(sb, rb, c, t, comm, st, cmp); });
    case Fn::kBroadcastEx:
      return call("cclBroadcastEx", [&] { return cclBroadcastEx(sb, rb, c, t, root, comm, st, cmp); });
    case Fn::kSendRecvEx: {
      const cclResult_t a = call("cclSendEx", [&] { return cclSendEx(sb, c, t, to, comm, st, cmp, fb); });
      return first(a, call("cclRecvEx", [&] { return cclRecvEx(rb, c, t, from, comm, st, cmp); }));
    }
    case Fn::kNum:
      break;
  }
  return cclInternalError;
}

namespace {

Spec validAllReduce(Rng& g) {
  Spec s;
  s.fn = Fn::kAllReduce;
  s.count = 1 + g.below(64);
  s.dtype = cclInt32;
  s.op = cclSum;
  s.salt = g.next();
  return s;
}

}  // namespace

void runRank(const Step& st, World& w, int r, uint64_t rankSeed, RankOutcome& o) {
  Rng g(rankSeed);
  const int n = w.size();
  build(st.main, r, n, g, o.main);
  o.extras.resize(st.extras.size());
  for (size_t i = 0; i < st.extras.size(); ++i) build(st.extras[i], r, n, g, o.extras[i]);
  for (int d = 0; d < st.depth; ++d) call("cclGroupStart", [] { return cclGroupStart(); });
  cclResult_t extraRc = cclSuccess;
  auto issueExtras = [&] {
    for (size_t i = 0; i < st.extras.size(); ++i) extraRc = first(extraRc, issue(st.extras[i], o.extras[i], w, r));
  };
  if (st.extrasBefore) issueExtras();
  o.mainRc = issue(st.main, o.main, w, r);
  if (!st.extrasBefore) issueExtras();
  for (int d = 0; d < st.depth; ++d) o.endRc = call("cclGroupEnd", [] { return cclGroupEnd(); });
  if (st.depth > 0 && (o.mainRc != cclSuccess || extraRc != cclSuccess) && o.endRc == cclSuccess)
    problem("cclGroupEnd succeeded although a call of its group failed: " + describe(st.main));
  o.final = st.depth > 0 ? o.endRc : o.mainRc;
  if (o.final != cclSuccess) o.message = lastError();
  const bool hostStream =
      st.main.stream == StreamKind::kHost ||
      std::any_of(st.extras.begin(), st.extras.end(), [](const Spec& e) { return e.stream == StreamKind::kHost; });
  if (hostStream) {
    const cclResult_t rc = call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(w.stream[r]); });
    if (o.final == cclSuccess && rc != cclSuccess) {
      o.final = rc;
      o.message = lastError();
    }
  }
  call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(w.comm[r], &o.async); });
  std::string hit = guardReport(o.main, "rank " + std::to_string(r) + " " + describe(st.main));
  for (auto& e : o.extras)
    if (hit.empty()) hit = guardReport(e, "rank " + std::to_string(r) + " extra allreduce of " + describe(st.main));
  if (!hit.empty()) problem(hit);
}

void runStep(World& w, const Step& st, Rng& master) {
  const int n = w.size();
  auto outcomes = std::make_shared<std::vector<RankOutcome>>(n);
  const uint64_t seed = master.next();
  w.run([&](int r) { runRank(st, w, r, mix(seed, r), (*outcomes)[r]); });
  bool anyOk = false, anyFail = false, asyncFailed = false;
  for (const RankOutcome& o : *outcomes) {
    (o.final == cclSuccess ? anyOk : anyFail) = true;
    asyncFailed = asyncFailed || o.async != cclSuccess;
  }
  const bool mustFail = !st.main.certain.empty() || st.mixStreams;
  const std::string what = describe(st.main) + (st.depth ? " in " + std::to_string(st.depth) + " group(s)" : "") +
                           (st.mixStreams ? " with calls on another stream" : "");
  if (mustFail && anyOk) problem("accepted a call that must fail: " + what);
  for (int r = 0; r < n; ++r) {
    const RankOutcome& o = (*outcomes)[r];
    if (o.final != cclSuccess && o.async == cclSuccess) {
      // Refused before it ran: nothing may have been written.
      bool same = unchanged(o.main);
      for (const auto& e : o.extras) same = same && unchanged(e);
      if (!same)
        problem("rank " + std::to_string(r) + " " + what + " failed (" + o.message + ") but wrote its buffers");
    }
  }
  if (!anyFail) {
    const bool checkMain = checkable(st.main, w.lossyDefault);
    for (int r = 0; r < n; ++r) {
      const RankOutcome& o = (*outcomes)[r];
      std::string bad = checkMain ? checkValues(st.main, o.main, r, n) : "";
      for (size_t i = 0; i < st.extras.size() && bad.empty(); ++i) bad = checkValues(st.extras[i], o.extras[i], r, n);
      if (!bad.empty()) {
        problem("wrong result of " + what + ": " + bad);
        break;
      }
    }
  } else if (!mustFail && checkable(st.main, w.lossyDefault) && !st.mixStreams) {
    for (int r = 0; r < n; ++r)
      if ((*outcomes)[r].final != cclSuccess) {
        problem("a valid call failed on rank " + std::to_string(r) + ": " + what + ": " + (*outcomes)[r].message);
        break;
      }
  }
  if ((anyOk && anyFail) || asyncFailed) {
    w.tainted = true;
    w.keepAlive.push_back(outcomes);
  }
}

Step randomStep(Rng& g, int n, bool mustFail) {
  Step st;
  st.main = randomSpec(g, n, mustFail);
  const bool p2p = fnInfo(st.main.fn).base == Base::kSendRecv;
  st.depth = p2p ? static_cast<int>(g.range(1, 3)) : g.chance(0.35) ? static_cast<int>(g.range(1, 3)) : 0;
  if (st.depth > 0 && g.chance(0.4)) {
    const int k = static_cast<int>(g.range(1, 2));
    for (int i = 0; i < k; ++i) {
      Spec e = validAllReduce(g);
      e.stream = st.main.stream == StreamKind::kFake ? StreamKind::kNone : st.main.stream;
      st.extras.push_back(e);
    }
    st.extrasBefore = g.chance(0.5);
    // A group's calls must share one stream; the main call on a host stream with extras on
    // NULL (or the other way round) is refused at cclGroupEnd.
    if (st.main.certain.empty() && st.main.stream != StreamKind::kFake && st.main.comm == CommKind::kReal &&
        g.chance(0.15)) {
      for (Spec& e : st.extras) e.stream = st.main.stream == StreamKind::kHost ? StreamKind::kNone : StreamKind::kHost;
      st.mixStreams = true;
    }
  }
  return st;
}

}  // namespace apifuzz
