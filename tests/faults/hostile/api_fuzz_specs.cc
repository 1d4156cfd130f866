// SPDX-License-Identifier: BSD-3-Clause
// The calls as specs: each collective's buffers and results as ccl.h defines them, random
// and invalid codec parameters, and random calls, valid or certain to fail.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "api_fuzz.h"

namespace apifuzz {

const BaseInfo& baseInfo(Base b) {
  static const BaseInfo table[] = {
      {false, true, Ext::kCount, Ext::kCount, false, false, InPlace::kSame},           // allreduce
      {true, false, Ext::kCount, Ext::kCount, true, false, InPlace::kSame},            // broadcast
      {true, true, Ext::kCount, Ext::kCount, false, true, InPlace::kSame},             // reduce
      {false, false, Ext::kCount, Ext::kPerRank, false, false, InPlace::kSendInRecv},  // allgather
      {false, true, Ext::kPerRank, Ext::kCount, false, false, InPlace::kRecvInSend},   // reducescatter
      {false, false, Ext::kPerRank, Ext::kPerRank, false, false, InPlace::kSame},      // alltoall
      {true, false, Ext::kCount, Ext::kPerRank, false, true, InPlace::kSendInRecv},    // gather
      {true, false, Ext::kPerRank, Ext::kCount, true, false, InPlace::kRecvInSend},    // scatter
      {false, false, Ext::kCount, Ext::kCount, false, false, InPlace::kNone},          // send + recv
  };
  return table[static_cast<int>(b)];
}

const FnInfo& fnInfo(Fn f) {
  static const FnInfo table[] = {
      {"cclAllReduce", Base::kAllReduce, false, false},  {"cclBroadcast", Base::kBroadcast, false, false},
      {"cclBcast", Base::kBroadcast, false, false},      {"cclReduce", Base::kReduce, false, false},
      {"cclAllGather", Base::kAllGather, false, false},  {"cclReduceScatter", Base::kReduceScatter, false, false},
      {"cclAlltoAll", Base::kAlltoAll, false, false},    {"cclGather", Base::kGather, false, false},
      {"cclScatter", Base::kScatter, false, false},      {"cclSend+cclRecv", Base::kSendRecv, false, false},
      {"cclAllReduceEx", Base::kAllReduce, true, true},  {"cclReduceScatterEx", Base::kReduceScatter, true, true},
      {"cclAllGatherEx", Base::kAllGather, true, true},  {"cclAlltoAllEx", Base::kAlltoAll, true, false},
      {"cclBroadcastEx", Base::kBroadcast, true, false}, {"cclSendEx+cclRecvEx", Base::kSendRecv, true, true},
  };
  return table[static_cast<int>(f)];
}

std::string describe(const Spec& s) {
  static const char* layouts[] = {"separate", "in-place", "overlapping", "NULL send", "NULL recv"};
  static const char* comms[] = {"real", "NULL", "garbage"};
  static const char* streams[] = {"NULL", "host", "fake"};
  static const char* codecs[] = {"NULL", "none", "random", "invalid"};
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "%s count %zu %s op %d root %d shift %d badPeer %d, %s buffers misaligned %zu/%zu, comm %s, stream %s, "
                "codec %s (%d), feedback %d",
                fnInfo(s.fn).name, s.count, typeName(s.dtype), s.op, s.root, s.shift, s.badPeer,
                layouts[static_cast<int>(s.layout)], s.misalignSend, s.misalignRecv, comms[static_cast<int>(s.comm)],
                streams[static_cast<int>(s.stream)], codecs[static_cast<int>(s.codecKind)],
                static_cast<int>(s.codec.codec), s.feedback);
  std::string out = buf;
  if (!s.certain.empty()) out += " [must fail: " + s.certain + "]";
  return out;
}

double sendValue(const Spec& s, int src, size_t i) {
  const uint64_t h = mix(s.salt ^ (static_cast<uint64_t>(src) << 48), i);
  if (baseInfo(fnInfo(s.fn).base).reduction && s.op == cclProd) return static_cast<double>(1 + (h & 1));
  return static_cast<double>(h % 16);
}

namespace {

double reduced(const Spec& s, int n, size_t i) {
  double acc = sendValue(s, 0, i);
  for (int src = 1; src < n; ++src) {
    const double v = sendValue(s, src, i);
    switch (s.op) {
      case cclProd:
        acc *= v;
        break;
      case cclMax:
        acc = std::max(acc, v);
        break;
      case cclMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  return s.op == cclAvg ? acc / n : acc;
}

}  // namespace

std::optional<double> expectedAt(const Spec& s, int r, int n, size_t j) {
  const size_t c = s.count;
  switch (fnInfo(s.fn).base) {
    case Base::kAllReduce:
      return reduced(s, n, j);
    case Base::kBroadcast:
      return sendValue(s, s.root, j);
    case Base::kReduce:
      return r == s.root ? std::optional<double>(reduced(s, n, j)) : std::nullopt;
    case Base::kAllGather:
      return sendValue(s, static_cast<int>(j / c), j % c);
    case Base::kReduceScatter:
      return reduced(s, n, static_cast<size_t>(r) * c + j);
    case Base::kAlltoAll:
      return sendValue(s, static_cast<int>(j / c), static_cast<size_t>(r) * c + j % c);
    case Base::kGather:
      return r == s.root ? std::optional<double>(sendValue(s, static_cast<int>(j / c), j % c)) : std::nullopt;
    case Base::kScatter:
      return sendValue(s, s.root, static_cast<size_t>(r) * c + j);
    case Base::kSendRecv:
      return sendValue(s, ((r - s.shift) % n + n) % n, j);
  }
  return std::nullopt;
}

bool checkable(const Spec& s, bool lossyDefault) {
  if (!s.certain.empty() || s.comm != CommKind::kReal || s.stream == StreamKind::kFake) return false;
  if (s.layout == Layout::kOverlap) return false;
  if (s.codecKind == CodecKind::kRandom || s.codecKind == CodecKind::kInvalid) return false;
  const int t = s.dtype;
  const bool floating16 = t == cclFloat16 || t == cclBfloat16;
  if (t == cclFloat8e4m3 || t == cclFloat8e5m2) return false;
  if ((t == cclFloat32 || floating16) && lossyDefault) return false;
  if (baseInfo(fnInfo(s.fn).base).reduction && s.op == cclAvg && t != cclFloat32 && t != cclFloat64) return false;
  return true;
}

cclCompression_t randomCompression(Rng& g) {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  c.codec = static_cast<cclCodec_t>(g.below(cclNumCodecs));
  static const int blocks[] = {0, 8, 16, 32, 64, 128, 256, 1024, 65536};
  c.blockSize = blocks[g.below(9)];
  if (g.chance(0.3)) c.bits = static_cast<int>(g.below(2) ? 16 : 32);
  if (g.chance(0.3)) c.scaleBits = g.chance(0.5) ? 16 : 32;
  c.keepRatio = g.chance(0.3) ? 0.0 : 0.001 + g.unit() * 0.999;
  c.threshold = static_cast<float>(g.unit() * 4);
  c.stochasticRounding = static_cast<int>(g.below(2));
  c.seed = g.next();
  c.rank = static_cast<int>(g.below(9));
  if (g.chance(0.2)) c.size = offsetof(cclCompression_t, rank);  // an older caller's struct
  return c;
}

cclCompression_t invalidCompression(Rng& g, std::string* why) {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  const cclCodec_t quantizers[] = {cclCodecFp8E4m3, cclCodecInt8, cclCodecInt4, cclCodecMxfp4};
  switch (g.below(10)) {
    case 0:
      c.magic = static_cast<unsigned>(g.next()) | 1u;
      c.magic = c.magic == CCL_COMPRESSION_MAGIC ? 0 : c.magic;
      *why = "compression magic";
      break;
    case 1:
      c.size = g.below(offsetof(cclCompression_t, codec) + sizeof(c.codec));
      *why = "compression size";
      break;
    case 2:
      c.codec = static_cast<cclCodec_t>(g.chance(0.5) ? cclNumCodecs + static_cast<int>(g.below(1000))
                                                      : -1 - static_cast<int>(g.below(1000)));
      *why = "codec out of range";
      break;
    case 3:
      c.codec = quantizers[g.below(4)];
      c.blockSize = g.chance(0.5) ? -static_cast<int>(1 + g.below(100)) : g.chance(0.5) ? 65544 : 12;
      *why = "quantizer blockSize";
      break;
    case 4:
      c.codec = cclCodecInt8;
      c.bits = 7;
      *why = "int8 bits";
      break;
    case 5:
      c.codec = cclCodecInt4;
      c.scaleBits = g.chance(0.5) ? 8 : 64;
      *why = "scaleBits";
      break;
    case 6:
      c.codec = g.chance(0.5) ? cclCodecTopK : cclCodecRandK;
      c.keepRatio = g.chance(0.3) ? NAN : g.chance(0.5) ? -0.5 : 1.5;
      *why = "keepRatio";
      break;
    case 7:
      c.codec = cclCodecThreshold;
      c.threshold = g.chance(0.5) ? -1.0f : NAN;
      *why = "threshold";
      break;
    case 8:
      c.codec = cclCodecTopK;
      c.bits = 8;
      *why = "sparsifier bits";
      break;
    default:
      c.codec = cclCodecPowerSgd;
      c.rank = g.chance(0.5) ? -3 : 0;
      if (c.rank == 0) c.rows = 4;  // rows without cols
      *why = "powersgd rank/shape";
      break;
  }
  return c;
}

namespace {

size_t randomCount(Rng& g) {
  const uint64_t k = g.below(100);
  if (k < 10) return 0;
  if (k < 55) return 1 + g.below(16);
  if (k < 88) return 17 + g.below(4080);
  return 4096 + g.below(36000);  // large enough for compression (CCL_CODEC_MIN_BYTES, 64 KiB)
}

int randomValidType(Rng& g) {
  static const int common[] = {cclInt32, cclFloat32, cclFloat64, cclInt64, cclUint8, cclBfloat16, cclFloat16};
  return g.chance(0.8) ? common[g.below(7)] : static_cast<int>(g.below(cclNumTypes));
}

int invalidType(Rng& g) {
  static const int bad[] = {cclNumTypes, cclNumTypes + 1, -1, 255, INT_MIN, INT_MAX, 1000};
  return bad[g.below(7)];
}

int invalidOp(Rng& g) {
  static const int bad[] = {cclNumOps, cclNumOps + 1, -1, cclMaxRedOp, INT_MIN, 17};
  return bad[g.below(6)];
}

// A count whose bytes (count * element size * nranks, the largest buffer) overflow size_t:
// the library must refuse it before touching memory. ("Negative" counts wrap to these.)
size_t overflowCount(Rng& g, int dtype, int n) {
  const size_t limit = SIZE_MAX / typeSize(dtype) / static_cast<size_t>(n);
  switch (g.below(4)) {
    case 0:
      return SIZE_MAX;
    case 1:
      return static_cast<size_t>(-static_cast<int64_t>(1 + g.below(1000)));
    case 2:
      return limit + 1;
    default:
      return limit + 1 + g.below(1u << 20);
  }
}

// One argument the header says makes the call fail, refused on every rank alike (the call
// may run on one rank only).
void addCertainFailure(Rng& g, int n, Spec& s) {
  const FnInfo& f = fnInfo(s.fn);
  const BaseInfo& b = baseInfo(f.base);
  // Buffers every rank uses; a NULL or overlap of a root-only buffer would fail on the root
  // alone and leave the others waiting for it.
  const bool nullSendEverywhere = !b.sendRootOnly && s.fn != Fn::kBcast;
  const bool nullRecvEverywhere = !b.recvRootOnly;
  for (;;) {
    switch (g.below(12)) {
      case 0:
        s.comm = CommKind::kNull;
        s.certain = "NULL comm";
        return;
      case 1:
        s.comm = CommKind::kGarbage;
        s.certain = "garbage comm";
        return;
      case 2:
        s.dtype = invalidType(g);
        s.certain = "invalid datatype";
        return;
      case 3:
        if (!b.reduction) continue;
        s.op = invalidOp(g);
        s.certain = "invalid op";
        return;
      case 4:
        if (!b.rooted) continue;
        s.root = g.chance(0.5) ? n + static_cast<int>(g.below(3)) : g.chance(0.5) ? -1 : INT_MIN;
        s.certain = "root out of range";
        return;
      case 5:
        if (f.base != Base::kSendRecv) continue;
        s.badPeer = g.chance(0.5) ? n + static_cast<int>(g.below(3)) : g.chance(0.5) ? -1 : INT_MAX;
        s.certain = "peer out of range";
        return;
      case 6:
        s.count = overflowCount(g, s.dtype, n);
        s.certain = "count overflows";
        return;
      case 7:
        if (s.count == 0) s.count = 1 + g.below(64);
        if (g.chance(0.5) && nullSendEverywhere) {
          s.layout = Layout::kNullSend;
        } else if (nullRecvEverywhere) {
          s.layout = Layout::kNullRecv;
        } else {
          continue;
        }
        s.certain = "NULL buffer with a count";
        return;
      case 8:
        if (b.rooted || f.base == Base::kSendRecv) continue;
        s.count = std::max<size_t>(s.count, 2);
        s.layout = Layout::kOverlap;
        s.certain = "overlapping buffers outside the in-place layout";
        return;
      case 9:
        s.stream = StreamKind::kFake;
        s.certain = "a stream that is not a host stream";
        return;
      case 10:
        if (!f.ex) continue;
        s.codecKind = CodecKind::kInvalid;
        s.codec = invalidCompression(g, &s.certain);
        return;
      default:
        // powersgd compresses send, recv and allreduce only; given to another collective
        // it is refused (ccl.h).
        if (!f.ex || f.base == Base::kAllReduce || f.base == Base::kSendRecv) continue;
        s.codecKind = CodecKind::kRandom;
        s.codec = CCL_COMPRESSION_INITIALIZER;
        s.codec.codec = cclCodecPowerSgd;
        s.certain = "powersgd given to a collective it does not compress";
        return;
    }
  }
}

}  // namespace

Spec randomSpec(Rng& g, int n, bool mustFail) {
  Spec s;
  s.fn = static_cast<Fn>(g.below(static_cast<uint64_t>(Fn::kNum)));
  const FnInfo& f = fnInfo(s.fn);
  const BaseInfo& b = baseInfo(f.base);
  s.count = randomCount(g);
  s.dtype = randomValidType(g);
  s.op = static_cast<int>(g.below(cclNumOps));
  s.root = static_cast<int>(g.below(n));
  s.shift = static_cast<int>(g.below(n));
  s.salt = g.next();
  if (s.fn == Fn::kBcast) {
    s.layout = Layout::kInPlace;
  } else if (b.inPlace != InPlace::kNone && g.chance(0.25)) {
    s.layout = Layout::kInPlace;
  }
  if (g.chance(0.2)) s.misalignSend = 1 + g.below(7);
  if (g.chance(0.2)) s.misalignRecv = 1 + g.below(7);
  if (g.chance(0.15)) s.stream = StreamKind::kHost;
  if (f.ex) {
    const uint64_t k = g.below(10);
    s.codecKind = k < 3 ? CodecKind::kNull : k < 5 ? CodecKind::kNone : CodecKind::kRandom;
    if (s.codecKind == CodecKind::kRandom) s.codec = randomCompression(g);
    if (f.feedback && g.chance(0.5)) s.feedback = static_cast<int>(g.below(2));
  }
  // Count 0 with NULL buffers is legal (it moves nothing).
  if (s.count == 0 && g.chance(0.3)) s.layout = g.chance(0.5) ? Layout::kNullSend : Layout::kNullRecv;
  if (mustFail) addCertainFailure(g, n, s);
  return s;
}

}  // namespace apifuzz
