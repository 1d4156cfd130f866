// SPDX-License-Identifier: BSD-3-Clause
// api_fuzz: the public C API (ccl.h) driven with random arguments drawn from --seed, on 2 to
// 4 ranks as threads. Every call must return cclSuccess or a ccl error code with a message
// from cclGetLastError, never crash, never write outside its buffers (each buffer sits
// between guard bytes checked after every call; ASan checks the rest) and never outlast
// CCL_TIMEOUT + 5 s (a watchdog ends the process with a report). Calls that the header says
// must fail (a NULL or garbage communicator, an invalid type, op, root or peer, an
// overflowing count, overlapping buffers outside the in-place layout, a stream that is not a
// host stream, invalid codec parameters, group misuse) must fail and leave their buffers
// untouched; valid calls are interleaved with them and their results checked, so the
// communicator is shown still healthy after what it refused. Calls that disagree across
// ranks must fail or return on every rank in time, after which a new communicator is made,
// as a user would. One JSON line per batch of inputs on stdout.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "fuzz_common.h"

namespace {

using fuzz::InCall;
using fuzz::mix;
using fuzz::Rng;

constexpr const char* kKind = "api_fuzz";
constexpr int kMaxRanks = 4;
constexpr int kMainSlot = 8;  // watch slot of the main thread (ranks use 0 .. kMaxRanks-1)

fuzz::Tally tally;
std::atomic<uint64_t> trialNo{0};
std::atomic<uint64_t> stepNo{0};
uint64_t seedValue = 1;

std::string context() { return "step " + std::to_string(stepNo.load()) + " of --seed " + std::to_string(seedValue); }

void problem(const std::string& what) { tally.problem(context() + ": " + what); }

// A communicator handle that is not one: the library must tell it apart by its magic, so
// it points at readable memory that holds anything but the magic.
alignas(64) unsigned char garbageComm[4096];
// A stream handle that was never made by cclHostStreamCreate (and is not a CUDA stream).
alignas(64) unsigned char fakeStreamBytes[64];
cclComm_t garbage() { return reinterpret_cast<cclComm_t>(garbageComm); }
cclStream_t fakeStream() { return reinterpret_cast<cclStream_t>(fakeStreamBytes); }

std::string lastError() {
  const char* m = cclGetLastError(nullptr);
  return m ? m : "(null)";
}

// The contract of every call's result: a ccl code; a failure leaves a message naming the
// function in cclGetLastError.
cclResult_t judge(const char* fn, cclResult_t rc, bool inProgressOk = false) {
  tally.inputs.fetch_add(1);
  const int v = static_cast<int>(rc);
  if (v < 0 || v >= cclNumResults) {
    problem(std::string(fn) + " returned " + std::to_string(v) + ", not a cclResult_t");
    return rc;
  }
  if (rc == cclSuccess || (inProgressOk && rc == cclInProgress)) {
    tally.completed.fetch_add(1);
    return rc;
  }
  tally.errors.fetch_add(1);
  const char* m = cclGetLastError(nullptr);
  if (!m || std::strncmp(m, "ccl", 3) != 0 || std::strlen(m) < 8)
    problem(std::string(fn) + " failed (" + cclGetErrorString(rc) + ") but cclGetLastError is '" + (m ? m : "NULL") +
            "'");
  return rc;
}

template <class F>
cclResult_t call(const char* fn, F&& f, bool inProgressOk = false) {
  cclResult_t rc;
  {
    InCall in(fn);
    rc = f();
  }
  return judge(fn, rc, inProgressOk);
}

// A name function: never NULL, never empty.
void judgeName(const char* fn, const char* name) {
  tally.inputs.fetch_add(1);
  tally.completed.fetch_add(1);
  if (!name || !*name) problem(std::string(fn) + " returned " + (name ? "an empty string" : "NULL"));
}

// ---------------------------------------------------------------------------------------
// Element types: exact small integers in every checked type.

size_t typeSize(int t) {
  static const size_t sizes[cclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return t >= 0 && t < cclNumTypes ? sizes[t] : 0;
}

const char* typeName(int t) {
  static const char* names[cclNumTypes] = {"int8",    "uint8",   "int32",   "uint32",   "int64",   "uint64",
                                           "float16", "float32", "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return t >= 0 && t < cclNumTypes ? names[t] : "invalid";
}

// IEEE half from a non-negative integer up to 2048 (exact).
uint16_t halfFrom(double v) {
  if (v == 0) return 0;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  const auto mant = static_cast<uint16_t>((m * 2 - 1) * 1024);
  return static_cast<uint16_t>(((e - 1 + 15) << 10) | mant);
}

double halfTo(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1 : 1;
  if (e == 0) return sign * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + m, e - 25);
}

template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

void put(void* p, int t, size_t i, double v) {
  switch (t) {
    case cclInt8:
      return store<int8_t>(p, i, static_cast<int8_t>(v));
    case cclUint8:
      return store<uint8_t>(p, i, static_cast<uint8_t>(v));
    case cclInt32:
      return store<int32_t>(p, i, static_cast<int32_t>(v));
    case cclUint32:
      return store<uint32_t>(p, i, static_cast<uint32_t>(v));
    case cclInt64:
      return store<int64_t>(p, i, static_cast<int64_t>(v));
    case cclUint64:
      return store<uint64_t>(p, i, static_cast<uint64_t>(v));
    case cclFloat16:
      return store<uint16_t>(p, i, halfFrom(v));
    case cclFloat32:
      return store<float>(p, i, static_cast<float>(v));
    case cclFloat64:
      return store<double>(p, i, v);
    case cclBfloat16: {
      const float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return store<uint16_t>(p, i, static_cast<uint16_t>(bits >> 16));
    }
    default:  // fp8: some small positive values; never checked
      return store<uint8_t>(p, i, static_cast<uint8_t>(0x20 + static_cast<int>(v)));
  }
}

double get(const void* p, int t, size_t i) {
  switch (t) {
    case cclInt8:
      return load<int8_t>(p, i);
    case cclUint8:
      return load<uint8_t>(p, i);
    case cclInt32:
      return load<int32_t>(p, i);
    case cclUint32:
      return load<uint32_t>(p, i);
    case cclInt64:
      return static_cast<double>(load<int64_t>(p, i));
    case cclUint64:
      return static_cast<double>(load<uint64_t>(p, i));
    case cclFloat16:
      return halfTo(load<uint16_t>(p, i));
    case cclFloat32:
      return load<float>(p, i);
    case cclFloat64:
      return load<double>(p, i);
    case cclBfloat16: {
      const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(p, i)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default:
      return NAN;
  }
}

// ---------------------------------------------------------------------------------------
// A buffer between guard bytes. The guards (and the bytes a misaligned payload skips) hold a
// position-dependent pattern, so a write of any shifted copy is seen.

class Guarded {
 public:
  static constexpr size_t kGuard = 64;
  Guarded(size_t bytes, size_t shift) : bytes_(bytes), shift_(shift), mem_(2 * kGuard + shift + bytes) {
    for (size_t j = 0; j < mem_.size(); ++j) mem_[j] = pattern(j);
  }
  uint8_t* data() { return mem_.data() + kGuard + shift_; }
  const uint8_t* data() const { return mem_.data() + kGuard + shift_; }
  size_t bytes() const { return bytes_; }
  // The offset (from the payload, negative before it) of the first changed guard byte.
  std::optional<long> hit() const {
    const size_t begin = kGuard + shift_, end = begin + bytes_;
    for (size_t j = 0; j < begin; ++j)
      if (mem_[j] != pattern(j)) return static_cast<long>(j) - static_cast<long>(begin);
    for (size_t j = end; j < mem_.size(); ++j)
      if (mem_[j] != pattern(j)) return static_cast<long>(j - begin);
    return std::nullopt;
  }

 private:
  static uint8_t pattern(size_t j) { return static_cast<uint8_t>(0xa5 ^ (j * 0x3b)); }
  size_t bytes_, shift_;
  std::vector<uint8_t> mem_;
};

// ---------------------------------------------------------------------------------------
// The calls: each collective's buffers as ccl.h defines them.

enum class Base {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv
};
enum class Ext { kCount, kPerRank };
enum class InPlace { kNone, kSame, kSendInRecv, kRecvInSend };

struct BaseInfo {
  bool rooted, reduction;
  Ext send, recv;
  bool sendRootOnly, recvRootOnly;
  InPlace inPlace;
};

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

enum class Fn {
  kAllReduce,
  kBroadcast,
  kBcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,
  kAllReduceEx,
  kReduceScatterEx,
  kAllGatherEx,
  kAlltoAllEx,
  kBroadcastEx,
  kSendRecvEx,
  kNum
};

struct FnInfo {
  const char* name;
  Base base;
  bool ex;
  bool feedback;  // takes an error-feedback handle
};

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

enum class Layout { kSeparate, kInPlace, kOverlap, kNullSend, kNullRecv };
enum class CommKind { kReal, kNull, kGarbage };
enum class StreamKind { kNone, kHost, kFake };
enum class CodecKind { kNull, kNone, kRandom, kInvalid };

// One call, the same on every rank (buffers apart); `certain` names the argument that the
// header says must make it fail, if any.
struct Spec {
  Fn fn = Fn::kAllReduce;
  size_t count = 0;
  int dtype = cclInt32;
  int op = cclSum;
  int root = 0;
  int shift = 0;    // send+recv: to rank + shift, from rank - shift
  int badPeer = 0;  // nonzero: the peer passed instead (out of range)
  Layout layout = Layout::kSeparate;
  size_t misalignSend = 0, misalignRecv = 0;
  CommKind comm = CommKind::kReal;
  StreamKind stream = StreamKind::kNone;
  CodecKind codecKind = CodecKind::kNull;
  cclCompression_t codec = CCL_COMPRESSION_INITIALIZER;
  int feedback = -1;  // the rank's feedback handle, or none
  std::string certain;
  uint64_t salt = 0;
};

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

// The value rank `src` holds at element i of its send buffer: small integers, exact in every
// checked type and in every sum over 4 ranks; 1 or 2 for products.
double sendValue(const Spec& s, int src, size_t i) {
  const uint64_t h = mix(s.salt ^ (static_cast<uint64_t>(src) << 48), i);
  if (baseInfo(fnInfo(s.fn).base).reduction && s.op == cclProd) return static_cast<double>(1 + (h & 1));
  return static_cast<double>(h % 16);
}

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

// What rank r's receive buffer holds at element j after the call; nullopt: what it held before.
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

// Whether a successful call's results can be checked exactly.
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

// ---------------------------------------------------------------------------------------
// Random codec parameters.

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

// Parameters the header says are invalid, one field at a time.
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

// ---------------------------------------------------------------------------------------
// The world: n ranks as persistent threads, each with its communicator, host stream and
// error-feedback handles.

class World {
 public:
  explicit World(int n) : n_(n) {
    for (int r = 0; r < n; ++r) threads_.emplace_back([this, r] { loop(r); });
  }
  ~World() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const { return n_; }

  // Runs fn(rank) on every rank's thread at once and waits for all.
  void run(const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = &fn;
    pending_ = n_;
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

  cclComm_t comm[kMaxRanks] = {};
  cclStream_t stream[kMaxRanks] = {};
  cclFeedback_t feedback[kMaxRanks][2] = {};
  bool lossyDefault = false;         // a lossy default codec may compress floating-point calls
  std::atomic<bool> tainted{false};  // a call failed inside the communicator: make a new one
  // What calls of a failed communicator may still point at, freed after it is destroyed.
  std::vector<std::shared_ptr<void>> keepAlive;

 private:
  void loop(int r) {
    fuzz::bindSlot(r);
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
        job = job_;
      }
      (*job)(r);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }

  int n_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool quit_ = false;
};

// A random valid configuration; `hostGroups` > 0 gives rank r the identity r % hostGroups,
// so that the communicator has several nodes and hierarchical plans.
struct ConfigHolder {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  std::string name, host;
  cclCompression_t intra = CCL_COMPRESSION_INITIALIZER;
};

void randomValidConfig(Rng& g, int rank, int hostGroups, ConfigHolder* h) {
  cclConfig_t& c = h->config;
  static const size_t sizes[] = {sizeof(cclConfig_t),
                                 offsetof(cclConfig_t, intraCompression),
                                 offsetof(cclConfig_t, hostId),
                                 offsetof(cclConfig_t, compression),
                                 offsetof(cclConfig_t, timeoutMs),
                                 offsetof(cclConfig_t, commName)};
  c.size = sizes[g.below(6)];
  if (g.chance(0.5)) c.blocking = 1;
  if (g.chance(0.5)) {
    static const char* names[] = {"fuzz", "%s%n%s%p", "a name with spaces and \"quotes\"", ""};
    h->name = names[g.below(4)];
    c.commName = h->name.c_str();
  }
  if (g.chance(0.5)) c.timeoutMs = 1000 * fuzz::cclTimeoutSeconds();
  if (hostGroups > 0) {
    h->host = "fuzz-host-" + std::to_string(rank % hostGroups);
    c.hostId = h->host.c_str();
  }
  if (g.chance(0.3)) c.intraCompression = &h->intra;  // codec none: intra-node steps stay exact
}

// Makes every rank's communicator (three ways), host stream and feedback handles.
bool initWorld(World& w, Rng& g) {
  const int n = w.size();
  const int how = static_cast<int>(g.below(3));
  std::vector<cclResult_t> rcs(n, cclSuccess);
  std::vector<std::string> why(n);
  if (how == 2) {
    fuzz::bindSlot(kMainSlot);
    cclComm_t made[kMaxRanks] = {};
    const cclResult_t rc = call("cclCommInitAll", [&] { return cclCommInitAll(made, n, nullptr); });
    if (rc != cclSuccess) {
      problem("cclCommInitAll of " + std::to_string(n) + " ranks failed: " + lastError());
      return false;
    }
    std::copy(made, made + n, w.comm);
  } else {
    cclUniqueId id;
    fuzz::bindSlot(kMainSlot);
    if (call("cclGetUniqueId", [&] { return cclGetUniqueId(&id); }) != cclSuccess) {
      problem("cclGetUniqueId failed: " + lastError());
      return false;
    }
    const int hostGroups = g.chance(0.5) ? static_cast<int>(g.range(1, 2)) : 0;
    const uint64_t configSeed = g.next();
    w.run([&](int r) {
      ConfigHolder h;
      Rng cg(configSeed);  // the same draws on every rank: one configuration
      randomValidConfig(cg, r, hostGroups, &h);
      rcs[r] = how == 0 ? call("cclCommInitRank", [&] { return cclCommInitRank(&w.comm[r], n, id, r); })
                        : call("cclCommInitRankConfig",
                               [&] { return cclCommInitRankConfig(&w.comm[r], n, id, r, &h.config); });
      if (rcs[r] != cclSuccess) why[r] = lastError();
    });
  }
  bool ok = true;
  for (int r = 0; r < n; ++r)
    if (rcs[r] != cclSuccess) {
      problem("a valid init of " + std::to_string(n) + " ranks failed on rank " + std::to_string(r) + ": " + why[r]);
      ok = false;
    }
  if (!ok) {
    w.run([&](int r) {
      if (w.comm[r]) call("cclCommDestroy", [&] { return cclCommDestroy(w.comm[r]); });
      w.comm[r] = nullptr;
    });
    return false;
  }
  const uint64_t fbSeed = g.next();
  w.run([&](int r) {
    int count = -1, rank = -1;
    call("cclCommCount", [&] { return cclCommCount(w.comm[r], &count); });
    call("cclCommUserRank", [&] { return cclCommUserRank(w.comm[r], &rank); });
    if (count != n || rank != r)
      problem("a new communicator says rank " + std::to_string(rank) + " of " + std::to_string(count) + ", expected " +
              std::to_string(r) + " of " + std::to_string(n));
    call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&w.stream[r]); });
    Rng fg(fbSeed);
    for (auto& fb : w.feedback[r]) {
      const auto kind = static_cast<cclFeedbackKind_t>(fg.below(3));
      call("cclFeedbackCreate", [&] { return cclFeedbackCreate(&fb, kind, 0.5f, static_cast<int>(fg.below(3))); });
    }
  });
  return true;
}

void destroyWorld(World& w) {
  w.run([&](int r) {
    call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(w.stream[r]); });
    for (auto& fb : w.feedback[r]) call("cclFeedbackDestroy", [&] { return cclFeedbackDestroy(fb); });
    call("cclCommDestroy", [&] { return cclCommDestroy(w.comm[r]); });
  });
  w.keepAlive.clear();
}

// ---------------------------------------------------------------------------------------
// Random specs.

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

// `mustFail`: one argument the header says makes the call fail. `local`: only arguments
// refused on every rank alike (the call may run on one rank only).
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
  if (!mustFail) return s;

  // Buffers every rank uses; a NULL or overlap of a root-only buffer would fail on the root
  // alone and leave the others waiting for it.
  const bool nullSendEverywhere = !b.sendRootOnly && s.fn != Fn::kBcast;
  const bool nullRecvEverywhere = !b.recvRootOnly;
  for (;;) {
    switch (g.below(12)) {
      case 0:
        s.comm = CommKind::kNull;
        s.certain = "NULL comm";
        return s;
      case 1:
        s.comm = CommKind::kGarbage;
        s.certain = "garbage comm";
        return s;
      case 2:
        s.dtype = invalidType(g);
        s.certain = "invalid datatype";
        return s;
      case 3:
        if (!b.reduction) continue;
        s.op = invalidOp(g);
        s.certain = "invalid op";
        return s;
      case 4:
        if (!b.rooted) continue;
        s.root = g.chance(0.5) ? n + static_cast<int>(g.below(3)) : g.chance(0.5) ? -1 : INT_MIN;
        s.certain = "root out of range";
        return s;
      case 5:
        if (f.base != Base::kSendRecv) continue;
        s.badPeer = g.chance(0.5) ? n + static_cast<int>(g.below(3)) : g.chance(0.5) ? -1 : INT_MAX;
        s.certain = "peer out of range";
        return s;
      case 6:
        s.count = overflowCount(g, s.dtype, n);
        s.certain = "count overflows";
        return s;
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
        return s;
      case 8:
        if (b.rooted || f.base == Base::kSendRecv) continue;
        s.count = std::max<size_t>(s.count, 2);
        s.layout = Layout::kOverlap;
        s.certain = "overlapping buffers outside the in-place layout";
        return s;
      case 9:
        s.stream = StreamKind::kFake;
        s.certain = "a stream that is not a host stream";
        return s;
      case 10:
        if (!f.ex) continue;
        s.codecKind = CodecKind::kInvalid;
        s.codec = invalidCompression(g, &s.certain);
        return s;
      default:
        // powersgd compresses send, recv and allreduce only; given to another collective
        // it is refused (ccl.h).
        if (!f.ex || f.base == Base::kAllReduce || f.base == Base::kSendRecv) continue;
        s.codecKind = CodecKind::kRandom;
        s.codec = CCL_COMPRESSION_INITIALIZER;
        s.codec.codec = cclCodecPowerSgd;
        s.certain = "powersgd given to a collective it does not compress";
        return s;
    }
  }
}

// ---------------------------------------------------------------------------------------
// One rank's part of a call: its buffers, filled, and what they held before.

struct Buffers {
  std::vector<std::unique_ptr<Guarded>> blocks;
  std::vector<std::vector<uint8_t>> before;  // each block's payload after filling
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t recvElems = 0;
  std::vector<uint8_t> recvBefore;
};

constexpr size_t kMaxAllocElems = 1 << 17;

// Buffers start misalignSend/misalignRecv units past their guard, which leaves them off any
// vector alignment. A unit is one element: a buffer that starts inside an element (possible
// for a void* but not for a C array of the type) makes the library's element loops load and
// store through misaligned typed pointers: undefined behaviour that UBSan stops at, which
// ccl.h neither refuses nor promises to support; --misalign bytes exercises it.
bool misalignBytes = false;
size_t misalignUnit(size_t elementSize) { return misalignBytes ? 1 : elementSize; }

Guarded* addBlock(Buffers& b, size_t bytes, size_t shift) {
  b.blocks.push_back(std::make_unique<Guarded>(bytes, shift));
  return b.blocks.back().get();
}

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

cclResult_t first(cclResult_t a, cclResult_t b) { return a != cclSuccess ? a : b; }

// Issues the call of `s` on rank r with buffers `b`.
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

// ---------------------------------------------------------------------------------------
// A step: the same calls on every rank, optionally inside (nested) groups with valid
// checked calls around them.

struct Step {
  Spec main;
  int depth = 0;  // nested cclGroupStart
  std::vector<Spec> extras;
  bool extrasBefore = true;
  bool mixStreams = false;  // the extras use another stream than the main call (refused at cclGroupEnd)
};

struct RankOutcome {
  cclResult_t mainRc = cclSuccess, endRc = cclSuccess, final = cclSuccess, async = cclSuccess;
  std::string message;
  Buffers main;
  std::vector<Buffers> extras;
};

Spec validAllReduce(Rng& g) {
  Spec s;
  s.fn = Fn::kAllReduce;
  s.count = 1 + g.below(64);
  s.dtype = cclInt32;
  s.op = cclSum;
  s.salt = g.next();
  return s;
}

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

// Runs `st` on every rank and judges the outcome. Marks the world tainted when the
// communicator may be out of step.
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

// ---------------------------------------------------------------------------------------
// Calls that need no peer: names, version, errors, feedback and stream handles, queries,
// and calls the header says must fail on this rank alone.

std::string randomText(Rng& g) {
  static const char* words[] = {
      "int8",   "INT4",   "topk",     "none",  "auto",     "all",     "sendrecv", "allreduce",
      "ring",   "tree",   "fp8_e4m3", "mxfp4", "",         " ",       ",",        "allreduce,,broadcast",
      "reduce", "gather", "twoshot",  "hier",  "powersgd", "invalid", "\xff\xfe"};
  std::string s;
  const int k = static_cast<int>(g.range(0, 3));
  for (int i = 0; i < k; ++i) {
    if (i) s += g.chance(0.7) ? "," : " ";
    if (g.chance(0.8)) {
      s += words[g.below(sizeof(words) / sizeof(words[0]))];
    } else {
      const int len = static_cast<int>(g.range(1, 40));
      for (int j = 0; j < len; ++j) s += static_cast<char>(1 + g.below(255));
    }
  }
  return s;
}

double randomDouble(Rng& g) {
  static const double special[] = {0.0, -0.0, 1.0, -1.0, NAN, INFINITY, -INFINITY, 1e308, 1e-308, 5e-324};
  return g.chance(0.5) ? special[g.below(10)] : (g.unit() - 0.3) * std::pow(10.0, static_cast<double>(g.range(-5, 5)));
}

int randomInt(Rng& g) {
  static const int special[] = {0, 1, -1, 2, 3, 7, 12, 13, 100, INT_MIN, INT_MAX, -1000};
  return g.chance(0.6) ? special[g.below(12)] : static_cast<int>(g.next());
}

void expectRefused(const std::string& what, cclResult_t rc) {
  if (rc == cclSuccess) problem(what + " accepted an invalid argument");
}

void tryVersion(Rng&, World&, int) {
  int v = -7;
  call("cclGetVersion", [&] { return cclGetVersion(&v); });
  if (v != CCL_VERSION_CODE) problem("cclGetVersion gave " + std::to_string(v));
  expectRefused("cclGetVersion(NULL)", call("cclGetVersion", [] { return cclGetVersion(nullptr); }));
}

void tryErrorString(Rng& g, World&, int) {
  judgeName("cclGetErrorString", cclGetErrorString(static_cast<cclResult_t>(randomInt(g))));
  judgeName("cclGetErrorString", cclGetErrorString(static_cast<cclResult_t>(g.below(cclNumResults))));
}

void tryLastError(Rng& g, World& w, int r) {
  cclComm_t comm = w.comm[r];
  tally.inputs.fetch_add(1);
  tally.completed.fetch_add(1);
  cclComm_t which = g.chance(0.3) ? garbage() : g.chance(0.5) ? nullptr : comm;
  if (!cclGetLastError(which)) problem("cclGetLastError returned NULL");
}

void tryCodecNames(Rng& g, World&, int) {
  const int c = randomInt(g);
  const char* name = cclCodecName(static_cast<cclCodec_t>(c));
  judgeName("cclCodecName", name);
  if (c >= 0 && c < cclNumCodecs) {
    cclCodec_t back = cclNumCodecs;
    std::string upper = name;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    call("cclCodecFromName", [&] { return cclCodecFromName(upper.c_str(), &back); });
    if (back != c) problem(std::string("cclCodecFromName(") + upper + ") did not give codec " + std::to_string(c));
  }
}

void tryCodecFromName(Rng& g, World&, int) {
  const std::string text = randomText(g);
  cclCodec_t c = static_cast<cclCodec_t>(-5);
  const bool nullName = g.chance(0.1), nullOut = g.chance(0.1);
  const cclResult_t rc = call(
      "cclCodecFromName", [&] { return cclCodecFromName(nullName ? nullptr : text.c_str(), nullOut ? nullptr : &c); });
  if (rc == cclSuccess && (nullName || nullOut || c < 0 || c >= cclNumCodecs))
    problem("cclCodecFromName('" + text + "') succeeded with codec " + std::to_string(c));
  if (rc != cclSuccess && c != static_cast<cclCodec_t>(-5)) problem("cclCodecFromName failed but wrote *codec");
}

void tryCounts(Rng&, World&, int) {
  tally.inputs.fetch_add(3);
  tally.completed.fetch_add(3);
  if (cclCodecCount() != cclNumCodecs) problem("cclCodecCount is " + std::to_string(cclCodecCount()));
  if (cclOpKindCount() != cclNumOpKinds) problem("cclOpKindCount is " + std::to_string(cclOpKindCount()));
  if (cclAlgorithmCount() < 1) problem("cclAlgorithmCount is " + std::to_string(cclAlgorithmCount()));
}

void tryErrorBound(Rng& g, World&, int) {
  std::string why;
  cclCompression_t c = g.chance(0.3) ? invalidCompression(g, &why) : randomCompression(g);
  const double a = randomDouble(g), m = g.chance(0.5) ? std::fabs(a) * 2 : randomDouble(g);
  const int q = g.chance(0.8) ? static_cast<int>(g.range(0, 8)) : randomInt(g);
  double bound = -12345;
  const bool nullCodec = g.chance(0.1), nullOut = g.chance(0.05);
  const cclResult_t rc = call("cclCodecErrorBound", [&] {
    return cclCodecErrorBound(nullCodec ? nullptr : &c, a, m, q, nullOut ? nullptr : &bound);
  });
  if (rc == cclSuccess && (nullOut || std::isnan(bound) || bound < 0))
    problem("cclCodecErrorBound gave " + std::to_string(bound));
  if (rc != cclSuccess && bound != -12345) problem("cclCodecErrorBound failed but wrote *bound");
  if (rc == cclSuccess && !why.empty() && !nullCodec)
    problem("cclCodecErrorBound accepted invalid parameters (" + why + ")");
}

void tryOpKindNames(Rng& g, World&, int) {
  const int k = randomInt(g);
  const char* name = cclOpKindName(static_cast<cclOpKind_t>(k));
  judgeName("cclOpKindName", name);
  cclOpKind_t back = static_cast<cclOpKind_t>(-3);
  const std::string text = g.chance(0.5) ? std::string(name) : randomText(g);
  const bool nullOut = g.chance(0.1);
  const cclResult_t rc =
      call("cclOpKindFromName", [&] { return cclOpKindFromName(text.c_str(), nullOut ? nullptr : &back); });
  if (rc == cclSuccess && (nullOut || back < 0 || back >= cclNumOpKinds))
    problem("cclOpKindFromName('" + text + "') succeeded with " + std::to_string(back));
  if (k >= 0 && k < cclNumOpKinds && text == name && !nullOut && back != k)
    problem(std::string("cclOpKindFromName(") + name + ") did not round-trip");
}

void tryCompressList(Rng& g, World&, int) {
  const std::string text = randomText(g);
  unsigned mask = 0xdeadbeef;
  const bool nullList = g.chance(0.1), nullOut = g.chance(0.1);
  const cclResult_t rc = call("cclCompressListParse", [&] {
    return cclCompressListParse(nullList ? nullptr : text.c_str(), nullOut ? nullptr : &mask);
  });
  if (rc == cclSuccess && !nullOut && (mask >> cclNumOpKinds) != 0)
    problem("cclCompressListParse('" + text + "') set bits beyond the op kinds");
  if (rc != cclSuccess && mask != 0xdeadbeef) problem("cclCompressListParse failed but wrote *mask");
}

void tryAlgorithmNames(Rng& g, World&, int) {
  const int a = randomInt(g);
  judgeName("cclAlgorithmName", cclAlgorithmName(a));
  int back = -77;
  const std::string text = g.chance(0.5) ? std::string(cclAlgorithmName(a)) : randomText(g);
  const cclResult_t rc = call("cclAlgorithmFromName", [&] { return cclAlgorithmFromName(text.c_str(), &back); });
  if (rc == cclSuccess && (back < 0 || back >= cclAlgorithmCount()))
    problem("cclAlgorithmFromName('" + text + "') gave " + std::to_string(back));
  const char* name = g.chance(0.5) ? nullptr : "ring";
  expectRefused("cclAlgorithmFromName(NULL output)",
                call("cclAlgorithmFromName", [&] { return cclAlgorithmFromName(name, nullptr); }));
}

void tryFeedbackHandles(Rng& g, World&, int) {
  cclFeedback_t fb = nullptr;
  const int kind = g.chance(0.7) ? static_cast<int>(g.below(3)) : randomInt(g);
  const float beta = g.chance(0.7) ? static_cast<float>(g.unit()) : static_cast<float>(randomDouble(g));
  const int reset = g.chance(0.7) ? static_cast<int>(g.below(5)) : randomInt(g);
  const bool nullOut = g.chance(0.1);
  const cclResult_t rc = call("cclFeedbackCreate", [&] {
    return cclFeedbackCreate(nullOut ? nullptr : &fb, static_cast<cclFeedbackKind_t>(kind), beta, reset);
  });
  const bool valid = !nullOut && kind >= 0 && kind <= 2 && beta >= 0 && beta < 1 && reset >= 0;
  if (rc == cclSuccess && !valid) problem("cclFeedbackCreate accepted invalid arguments");
  if (rc != cclSuccess && valid) problem("cclFeedbackCreate refused valid arguments: " + lastError());
  if (rc != cclSuccess && fb) problem("cclFeedbackCreate failed but wrote *feedback");
  call("cclFeedbackDestroy", [&] { return cclFeedbackDestroy(rc == cclSuccess ? fb : nullptr); });
}

void tryHostStreams(Rng&, World&, int) {
  expectRefused("cclHostStreamCreate(NULL)", call("cclHostStreamCreate", [] { return cclHostStreamCreate(nullptr); }));
  cclStream_t s = nullptr;
  if (call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&s); }) != cclSuccess) return;
  call(
      "cclHostStreamQuery", [&] { return cclHostStreamQuery(s); }, true);
  call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(s); });
  call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(s); });
  call("cclHostStreamDestroy", [] { return cclHostStreamDestroy(nullptr); });
}

void tryBadStreams(Rng& g, World&, int) {
  if (g.chance(0.3)) {
    // A destroyed stream's handle is looked up, never followed: refused, unless another
    // thread's new stream took its address meanwhile (then it is that stream: either way
    // a valid result, and nothing here destroys it).
    cclStream_t old = nullptr;
    if (call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&old); }) != cclSuccess) return;
    call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(old); });
    call(
        "cclHostStreamQuery", [&] { return cclHostStreamQuery(old); }, true);
    call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(old); });
    return;
  }
  cclStream_t s = g.chance(0.5) ? fakeStream() : nullptr;
  expectRefused("cclHostStreamSynchronize(bad)",
                call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(s); }));
  expectRefused("cclHostStreamQuery(bad)", call("cclHostStreamQuery", [&] { return cclHostStreamQuery(s); }));
  if (s)
    expectRefused("cclHostStreamDestroy(bad)", call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(s); }));
}

void tryGroupMisuse(Rng& g, World&, int) {
  // Group misuse: an end without a start; balanced empty groups, nested.
  expectRefused("cclGroupEnd without cclGroupStart", call("cclGroupEnd", [] { return cclGroupEnd(); }));
  const int depth = static_cast<int>(g.range(1, 4));
  for (int d = 0; d < depth; ++d) call("cclGroupStart", [] { return cclGroupStart(); });
  for (int d = 0; d < depth; ++d)
    if (call("cclGroupEnd", [] { return cclGroupEnd(); }) != cclSuccess) problem("an empty group failed");
}

void tryQueries(Rng& g, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = w.comm[r];
  // Queries of the real communicator, with NULL outputs now and then.
  int v = -9;
  const bool nullOut = g.chance(0.3);
  switch (g.below(4)) {
    case 0: {
      const cclResult_t rc = call("cclCommCount", [&] { return cclCommCount(comm, nullOut ? nullptr : &v); });
      if (nullOut) expectRefused("cclCommCount(NULL)", rc);
      if (!nullOut && v != n) problem("cclCommCount gave " + std::to_string(v));
      break;
    }
    case 1: {
      const cclResult_t rc = call("cclCommUserRank", [&] { return cclCommUserRank(comm, nullOut ? nullptr : &v); });
      if (nullOut) expectRefused("cclCommUserRank(NULL)", rc);
      if (!nullOut && v != r) problem("cclCommUserRank gave " + std::to_string(v));
      break;
    }
    case 2: {
      const cclResult_t rc = call("cclCommCuDevice", [&] { return cclCommCuDevice(comm, nullOut ? nullptr : &v); });
      if (nullOut) expectRefused("cclCommCuDevice(NULL)", rc);
      if (!nullOut && v < -1) problem("cclCommCuDevice gave " + std::to_string(v));
      break;
    }
    default: {
      cclResult_t e = static_cast<cclResult_t>(-1);
      const cclResult_t rc =
          call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(comm, nullOut ? nullptr : &e); });
      if (nullOut) expectRefused("cclCommGetAsyncError(NULL)", rc);
      if (!nullOut && e != cclSuccess) problem("a healthy communicator has async error " + std::to_string(e));
      break;
    }
  }
}

void tryTopology(Rng& g, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = w.comm[r];
  int node = -5, nnodes = -5, local = -5, locals = -5;
  const unsigned which = static_cast<unsigned>(g.below(16));
  call("cclCommTopology", [&] {
    return cclCommTopology(comm, which & 1 ? &node : nullptr, which & 2 ? &nnodes : nullptr,
                           which & 4 ? &local : nullptr, which & 8 ? &locals : nullptr);
  });
  if ((which & 1 && (node < 0 || node >= n)) || (which & 2 && (nnodes < 1 || nnodes > n)) ||
      (which & 4 && (local < 0 || local >= n)) || (which & 8 && (locals < 1 || locals > n)) ||
      ((which & 3) == 3 && node >= nnodes))
    problem("cclCommTopology gave node " + std::to_string(node) + " of " + std::to_string(nnodes) + ", local " +
            std::to_string(local) + " of " + std::to_string(locals));
}

void tryStats(Rng& g, World& w, int r) {
  cclComm_t comm = w.comm[r];
  // Statistics into a struct whose size says how much may be written.
  Guarded buf(sizeof(cclStats_t), 0);
  cclStats_t init = CCL_STATS_INITIALIZER;
  const uint64_t k = g.below(5);
  init.size = k == 0   ? g.below(offsetof(cclStats_t, op))
              : k == 1 ? sizeof(cclStats_t)
                       : g.below(sizeof(cclStats_t) + 1);
  if (g.chance(0.1)) init.magic ^= 1u << g.below(32);
  std::memcpy(buf.data(), &init, sizeof(init));
  std::vector<uint8_t> before(buf.data(), buf.data() + buf.bytes());
  const bool nullOut = g.chance(0.05);
  const cclResult_t rc = call("cclCommGetStats", [&] {
    return cclCommGetStats(comm, nullOut ? nullptr : reinterpret_cast<cclStats_t*>(buf.data()));
  });
  const bool valid = !nullOut && init.magic == CCL_STATS_MAGIC && init.size >= offsetof(cclStats_t, op);
  if (rc == cclSuccess && !valid) problem("cclCommGetStats accepted an invalid stats struct");
  if (rc != cclSuccess && valid) problem("cclCommGetStats refused a valid stats struct: " + lastError());
  const size_t written = rc == cclSuccess ? std::min(init.size, sizeof(cclStats_t)) : 0;
  if (std::memcmp(buf.data() + written, before.data() + written, buf.bytes() - written) != 0)
    problem("cclCommGetStats wrote beyond stats->size (" + std::to_string(init.size) + ")");
  if (buf.hit()) problem("cclCommGetStats wrote outside the struct");
}

void tryBadComms(Rng& g, World&, int) {
  // Every function that takes a communicator, given NULL or one that is not.
  cclComm_t bad = g.chance(0.5) ? garbage() : nullptr;
  int v = 1234;
  cclResult_t e = static_cast<cclResult_t>(1234);
  cclComm_t child = reinterpret_cast<cclComm_t>(0x1);
  switch (g.below(10)) {
    case 0:
      expectRefused("cclCommCount(bad)", call("cclCommCount", [&] { return cclCommCount(bad, &v); }));
      break;
    case 1:
      expectRefused("cclCommUserRank(bad)", call("cclCommUserRank", [&] { return cclCommUserRank(bad, &v); }));
      break;
    case 2:
      expectRefused("cclCommCuDevice(bad)", call("cclCommCuDevice", [&] { return cclCommCuDevice(bad, &v); }));
      break;
    case 3:
      expectRefused("cclCommGetAsyncError(bad)",
                    call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(bad, &e); }));
      break;
    case 4:
      expectRefused("cclCommTopology(bad)",
                    call("cclCommTopology", [&] { return cclCommTopology(bad, &v, &v, &v, &v); }));
      break;
    case 5:
      expectRefused("cclCommFinalize(bad)", call("cclCommFinalize", [&] { return cclCommFinalize(bad); }));
      break;
    case 6:
      if (bad) {
        expectRefused("cclCommDestroy(garbage)", call("cclCommDestroy", [&] { return cclCommDestroy(bad); }));
        expectRefused("cclCommAbort(garbage)", call("cclCommAbort", [&] { return cclCommAbort(bad); }));
      } else if (call("cclCommDestroy", [] { return cclCommDestroy(nullptr); }) != cclSuccess ||
                 call("cclCommAbort", [] { return cclCommAbort(nullptr); }) != cclSuccess) {
        problem("cclCommDestroy/cclCommAbort(NULL) failed");
      }
      break;
    case 7:
      expectRefused("cclCommSplit(bad)",
                    call("cclCommSplit", [&] { return cclCommSplit(bad, 0, 0, &child, nullptr); }));
      if (child != reinterpret_cast<cclComm_t>(0x1)) problem("cclCommSplit failed but wrote *newcomm");
      break;
    case 8: {
      cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
      expectRefused("cclCommSetCompression(bad)",
                    call("cclCommSetCompression", [&] { return cclCommSetCompression(bad, &c); }));
      break;
    }
    default: {
      cclStats_t s = CCL_STATS_INITIALIZER;
      expectRefused("cclCommGetStats(bad)", call("cclCommGetStats", [&] { return cclCommGetStats(bad, &s); }));
      break;
    }
  }
  if (v != 1234 || e != static_cast<cclResult_t>(1234)) problem("a call on a bad communicator wrote its output");
}

void tryBadCompression(Rng& g, World& w, int r) {
  cclComm_t comm = w.comm[r];
  // cclCommSetCompression with parameters the header says are invalid: refused, and the
  // communicator keeps its codec (later checked calls would show a change).
  std::string why;
  cclCompression_t c = invalidCompression(g, &why);
  expectRefused("cclCommSetCompression(" + why + ")",
                call("cclCommSetCompression", [&] { return cclCommSetCompression(comm, &c); }));
}

void tryBadInit(Rng& g, World&, int) {
  // Init arguments refused before any rendezvous.
  cclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  for (auto& ch : id.internal) ch = static_cast<char>(g.below(256));
  cclComm_t out = reinterpret_cast<cclComm_t>(0x2);
  const uint64_t k = g.below(4);
  const int nr = k == 0 ? (g.chance(0.5) ? 0 : -static_cast<int>(g.below(5)) - 1) : 1 + static_cast<int>(g.below(4));
  const int rk = k == 1 ? (g.chance(0.5) ? nr : -1) : 0;
  const cclResult_t rc =
      k == 3 ? call("cclCommInitRank", [&] { return cclCommInitRank(nullptr, 1, id, 0); })
             : call("cclCommInitRank", [&] { return cclCommInitRank(&out, nr, id, rk); });  // bad sizes or id
  if (rc == cclSuccess) {
    problem("cclCommInitRank accepted nranks " + std::to_string(nr) + " rank " + std::to_string(rk) +
            " with a random id");
    if (k != 3) call("cclCommDestroy", [&] { return cclCommDestroy(out); });
  } else if (out != reinterpret_cast<cclComm_t>(0x2)) {
    problem("cclCommInitRank failed but wrote *comm");
  }
}

void tryBadInitAll(Rng& g, World&, int) {
  cclComm_t out[2] = {reinterpret_cast<cclComm_t>(0x3), reinterpret_cast<cclComm_t>(0x3)};
  const bool nullComms = g.chance(0.3);
  const int ndev = nullComms ? 2 : (g.chance(0.5) ? 0 : -static_cast<int>(1 + g.below(100)));
  expectRefused("cclCommInitAll(bad)",
                call("cclCommInitAll", [&] { return cclCommInitAll(nullComms ? nullptr : out, ndev, nullptr); }));
  if (out[0] != reinterpret_cast<cclComm_t>(0x3)) problem("cclCommInitAll failed but wrote *comms");
  expectRefused("cclGetUniqueId(NULL)", call("cclGetUniqueId", [] { return cclGetUniqueId(nullptr); }));
}

void tryBadConfig(Rng& g, World&, int) {
  // An invalid configuration is refused before the rendezvous (this id is never joined).
  cclConfig_t c = CCL_CONFIG_INITIALIZER;
  std::string why, text;
  cclCompression_t cmp = invalidCompression(g, &why);
  switch (g.below(7)) {
    case 0:
      c.magic ^= 1u << g.below(32);
      why = "config magic";
      break;
    case 1:
      c.size = g.below(offsetof(cclConfig_t, blocking));
      why = "config size";
      break;
    case 2:
      c.blocking = g.chance(0.5) ? 2 : -1;
      why = "blocking";
      break;
    case 3:
      c.timeoutMs = g.chance(0.5) ? 0 : -static_cast<int>(1 + g.below(1000));
      why = "timeoutMs";
      break;
    case 4:
      text = g.chance(0.3) ? "" : g.chance(0.5) ? std::string(256, 'h') : "host\nname";
      c.hostId = text.c_str();
      why = "hostId text";
      break;
    case 5:
      c.compression = &cmp;
      why = "config compression: " + why;
      break;
    default:
      c.intraCompression = &cmp;
      why = "config intraCompression: " + why;
      break;
  }
  cclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  cclComm_t out = reinterpret_cast<cclComm_t>(0x4);
  expectRefused("cclCommInitRankConfig(" + why + ")",
                call("cclCommInitRankConfig", [&] { return cclCommInitRankConfig(&out, 1, id, 0, &c); }));
  if (out != reinterpret_cast<cclComm_t>(0x4)) problem("cclCommInitRankConfig failed but wrote *comm");
}

void tryRefusedCall(Rng& g, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = w.comm[r];
  // A call the header says must fail, on this rank alone: refused without waiting for
  // peers, with its buffers untouched.
  const Spec s = randomSpec(g, n, true);
  Buffers b;
  build(s, r, n, g, b);
  // A send and its receive go in one group: a refused send must not leave its receive
  // waiting alone.
  const bool p2p = fnInfo(s.fn).base == Base::kSendRecv;
  if (p2p) call("cclGroupStart", [] { return cclGroupStart(); });
  cclResult_t rc = issue(s, b, w, r);
  if (p2p) rc = first(call("cclGroupEnd", [] { return cclGroupEnd(); }), rc);
  if (rc == cclSuccess) {
    problem("accepted a call that must fail: " + describe(s));
    w.tainted = true;
  } else {
    cclResult_t a = cclSuccess;
    call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(comm, &a); });
    if (a != cclSuccess) {
      problem("a refused call left the communicator failed: " + describe(s));
      w.tainted = true;
    }
    if (!unchanged(b)) problem("refused call wrote its buffers: " + describe(s));
  }
  const std::string hit = guardReport(b, describe(s));
  if (!hit.empty()) problem(hit);
}

// The calls other than the collectives, one function each. A call refused on this rank alone
// (tryRefusedCall) is drawn four times as often as each of the others.
using MiscCall = void (*)(Rng& g, World& w, int r);
constexpr MiscCall kMiscCalls[] = {
    tryVersion,        tryErrorString, tryLastError,    tryCodecNames,     tryCodecFromName,   tryCounts,
    tryErrorBound,     tryOpKindNames, tryCompressList, tryAlgorithmNames, tryFeedbackHandles, tryHostStreams,
    tryBadStreams,     tryGroupMisuse, tryQueries,      tryTopology,       tryStats,           tryBadComms,
    tryBadCompression, tryBadInit,     tryBadInitAll,   tryBadConfig};

void miscCall(Rng& g, World& w, int r) {
  const size_t k = g.below(std::size(kMiscCalls) + 4);
  (k < std::size(kMiscCalls) ? kMiscCalls[k] : tryRefusedCall)(g, w, r);
}

// ---------------------------------------------------------------------------------------
// Steps of several ranks: codecs, split, finalize, abort, init, mismatch.

void setCompressionStep(World& w, Rng& g) {
  const uint64_t k = g.below(4);
  std::string why;
  cclCompression_t c = k == 0   ? invalidCompression(g, &why)
                       : k == 1 ? randomCompression(g)
                                : cclCompression_t(CCL_COMPRESSION_INITIALIZER);
  const bool null = k == 3;
  std::vector<cclResult_t> rcs(w.size());
  w.run([&](int r) {
    rcs[r] = call("cclCommSetCompression", [&] { return cclCommSetCompression(w.comm[r], null ? nullptr : &c); });
  });
  const bool allOk = std::all_of(rcs.begin(), rcs.end(), [](cclResult_t rc) { return rc == cclSuccess; });
  const bool allFail = std::none_of(rcs.begin(), rcs.end(), [](cclResult_t rc) { return rc == cclSuccess; });
  if (k == 0 && !allFail) problem("cclCommSetCompression accepted invalid parameters (" + why + ")");
  if (k >= 2 && !allOk) problem("cclCommSetCompression refused codec none or NULL");
  if (!allOk && !allFail) w.tainted = true;  // ranks now differ in their default codec
  if (allOk) w.lossyDefault = !null && c.codec != cclCodecNone;
}

// The communicator a split should give rank r (its rank and size), from every rank's color
// and key; {-1, 0} for CCL_SPLIT_NOCOLOR.
std::pair<int, int> splitPlace(const std::vector<int>& colors, const std::vector<int>& keys, int r) {
  if (colors[r] == CCL_SPLIT_NOCOLOR) return {-1, 0};
  std::vector<int> mine;
  for (size_t q = 0; q < colors.size(); ++q)
    if (colors[q] == colors[r]) mine.push_back(static_cast<int>(q));
  std::stable_sort(mine.begin(), mine.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  const int at = static_cast<int>(std::find(mine.begin(), mine.end(), r) - mine.begin());
  return {at, static_cast<int>(mine.size())};
}

void splitStep(World& w, Rng& g) {
  const int n = w.size();
  // Arguments every rank refuses alike: a negative color other than NOCOLOR, no output, a
  // group, a configuration that is invalid or names another host identity than the parent's
  // (a split keeps every rank's identity).
  const uint64_t bad = g.below(10);
  if (bad < 4) {
    const int color = g.chance(0.5) ? -2 : INT_MIN;
    const uint64_t configFault = g.below(3);
    w.run([&](int r) {
      cclComm_t child = reinterpret_cast<cclComm_t>(0x5);
      cclResult_t rc;
      if (bad == 0) {
        rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], color, 0, &child, nullptr); });
      } else if (bad == 1) {
        rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, nullptr, nullptr); });
      } else if (bad == 2) {
        cclConfig_t c = CCL_CONFIG_INITIALIZER;
        if (configFault == 0) c.magic = 0;
        if (configFault == 1) c.timeoutMs = -1;
        if (configFault == 2) c.hostId = "not-the-parent's-host";
        rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, &child, &c); });
      } else {
        call("cclGroupStart", [] { return cclGroupStart(); });
        rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, &child, nullptr); });
        call("cclGroupEnd", [] { return cclGroupEnd(); });
      }
      expectRefused("cclCommSplit(invalid)", rc);
      if (child != reinterpret_cast<cclComm_t>(0x5)) problem("cclCommSplit failed but wrote *newcomm");
    });
    return;
  }
  std::vector<int> colors(n), keys(n);
  // Mostly two colors, so that new communicators have several ranks; now and then no color
  // or a large one.
  static const int palette[] = {0, 1, CCL_SPLIT_NOCOLOR, 7, INT_MAX};
  for (int r = 0; r < n; ++r) {
    colors[r] = palette[g.below(g.chance(0.7) ? 2 : 5)];
    keys[r] = g.chance(0.5) ? static_cast<int>(g.below(3)) : randomInt(g);
  }
  const bool finalize = g.chance(0.4);
  const bool withConfig = g.chance(0.3);  // else the parent's configuration
  const uint64_t salt = g.next();
  std::vector<cclComm_t> child(n, nullptr);
  std::vector<cclResult_t> rcs(n);
  w.run([&](int r) {
    cclConfig_t c = CCL_CONFIG_INITIALIZER;
    c.commName = "split";
    c.timeoutMs = 1000 * fuzz::cclTimeoutSeconds();
    rcs[r] = call("cclCommSplit",
                  [&] { return cclCommSplit(w.comm[r], colors[r], keys[r], &child[r], withConfig ? &c : nullptr); });
  });
  for (int r = 0; r < n; ++r) {
    if (rcs[r] != cclSuccess) {
      problem("cclCommSplit failed on rank " + std::to_string(r) + " with valid arguments");
      w.tainted = true;
    }
  }
  if (w.tainted) {
    w.run([&](int r) {
      if (child[r]) call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
    });
    return;
  }
  // Each new communicator: its place, a checked allreduce, then finalize (calls refused
  // after it) or destroy.
  std::vector<std::string> bad2(n);
  w.run([&](int r) {
    const auto [rank, size] = splitPlace(colors, keys, r);
    if (rank < 0) {
      if (child[r]) bad2[r] = "a rank with CCL_SPLIT_NOCOLOR got a communicator";
      return;
    }
    int cr = -1, cn = -1;
    call("cclCommUserRank", [&] { return cclCommUserRank(child[r], &cr); });
    call("cclCommCount", [&] { return cclCommCount(child[r], &cn); });
    if (cr != rank || cn != size) {
      bad2[r] = "split gave rank " + std::to_string(cr) + " of " + std::to_string(cn) + ", expected " +
                std::to_string(rank) + " of " + std::to_string(size);
      return;
    }
    const size_t count = 1 + mix(salt) % 300;
    std::vector<int64_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>(mix(salt, i) % 1000) + rank;
    if (call("cclAllReduce", [&] {
          return cclAllReduce(in.data(), out.data(), count, cclInt64, cclMax, child[r], nullptr);
        }) != cclSuccess) {
      bad2[r] = "allreduce on a split communicator failed: " + lastError();
      return;
    }
    for (size_t i = 0; i < count; ++i)
      if (out[i] != static_cast<int64_t>(mix(salt, i) % 1000) + size - 1) {
        bad2[r] = "allreduce max on a split communicator gave a wrong value";
        return;
      }
    if (finalize) {
      call("cclCommFinalize", [&] { return cclCommFinalize(child[r]); });
      expectRefused("cclAllReduce after cclCommFinalize", call("cclAllReduce", [&] {
                      return cclAllReduce(in.data(), out.data(), count, cclInt64, cclMax, child[r], nullptr);
                    }));
      expectRefused("cclCommFinalize twice", call("cclCommFinalize", [&] { return cclCommFinalize(child[r]); }));
      int node = -1;
      call("cclCommTopology", [&] { return cclCommTopology(child[r], &node, nullptr, nullptr, nullptr); });
    }
  });
  w.run([&](int r) {
    if (child[r]) call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
  });
  for (int r = 0; r < n; ++r)
    if (!bad2[r].empty()) problem("rank " + std::to_string(r) + ": " + bad2[r]);
}

// Abort: one rank aborts its part of a new communicator while the others (or its own host
// stream) wait in an allreduce on it. Every waiting call must fail in time, and the parent
// communicator stay healthy.
void abortStep(World& w, Rng& g) {
  const int n = w.size();
  const int victim = static_cast<int>(g.below(n));
  const bool viaStream = g.chance(0.5);
  std::vector<cclComm_t> child(n, nullptr);
  std::vector<cclResult_t> rcs(n, cclSuccess);
  w.run(
      [&](int r) { rcs[r] = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, &child[r], nullptr); }); });
  if (std::any_of(rcs.begin(), rcs.end(), [](cclResult_t rc) { return rc != cclSuccess; })) {
    problem("cclCommSplit of the whole communicator failed");
    w.tainted = true;
    w.run([&](int r) {
      if (child[r]) call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
    });
    return;
  }
  w.run([&](int r) {
    std::vector<float> in(1000, 1.f), out(1000, 0.f);
    if (r == victim) {
      if (viaStream) {
        // Enqueued, then aborted from this thread: the queued operation fails promptly
        // (its peers never join it).
        cclStream_t s = nullptr;
        call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&s); });
        call("cclAllReduce",
             [&] { return cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, child[r], s); });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        call("cclCommAbort", [&] { return cclCommAbort(child[r]); });
        const cclResult_t rc = call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(s); });
        if (rc == cclSuccess) problem("an allreduce queued on an aborted communicator succeeded");
        call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(s); });
      } else {
        call("cclCommAbort", [&] { return cclCommAbort(child[r]); });
      }
      return;
    }
    if (!viaStream) {
      const cclResult_t rc = call("cclAllReduce", [&] {
        return cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, child[r], nullptr);
      });
      if (rc == cclSuccess) problem("an allreduce succeeded although rank " + std::to_string(victim) + " aborted");
    }
    call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
  });
}

// One-rank communicators with random configurations, cclCommInitAll, and inits whose ranks
// disagree (every rank must fail, quickly where the root can tell).
void initStep(World& w, Rng& g) {
  const int n = w.size();
  const uint64_t k = g.below(10);
  if (k < 5) {
    const uint64_t seed = g.next();
    w.run([&](int r) {
      Rng cg(mix(seed, r));
      ConfigHolder h;
      randomValidConfig(cg, 0, cg.chance(0.5) ? 1 : 0, &h);
      std::string why;
      cclCompression_t cmp = cg.chance(0.5) ? randomCompression(cg) : invalidCompression(cg, &why);
      if (cg.chance(0.3)) h.config.compression = &cmp;
      if (cg.chance(0.2)) h.config.intraCompression = &cmp;
      if (cg.chance(0.2)) h.config.blocking = 0;
      const bool used = h.config.compression == &cmp || h.config.intraCompression == &cmp;
      cclUniqueId id;
      if (call("cclGetUniqueId", [&] { return cclGetUniqueId(&id); }) != cclSuccess) return;
      cclComm_t c = nullptr;
      const cclResult_t rc = call(
          "cclCommInitRankConfig", [&] { return cclCommInitRankConfig(&c, 1, id, 0, &h.config); }, true);
      if (rc == cclSuccess && used && !why.empty() && h.config.size == sizeof(cclConfig_t))
        problem("cclCommInitRankConfig accepted invalid codec parameters (" + why + ")");
      if (rc != cclSuccess) return;
      int32_t v = 5, out = 0;
      if (call("cclAllReduce", [&] { return cclAllReduce(&v, &out, 1, cclInt32, cclSum, c, nullptr); }) != cclSuccess ||
          out != 5)
        problem("a one-rank communicator with a random config failed an allreduce");
      call("cclCommDestroy", [&] { return cclCommDestroy(c); });
    });
    return;
  }
  if (k < 8) {
    // cclCommInitAll from one thread, driven in one group from that thread.
    const int ndev = static_cast<int>(g.range(1, 4));
    const uint64_t salt = g.next();
    w.run([&](int r) {
      if (r != 0) return;
      cclComm_t comms[kMaxRanks] = {};
      if (call("cclCommInitAll", [&] { return cclCommInitAll(comms, ndev, nullptr); }) != cclSuccess) {
        problem("cclCommInitAll(" + std::to_string(ndev) + ") failed: " + lastError());
        return;
      }
      const size_t count = 1 + mix(salt) % 500;
      std::vector<std::vector<int32_t>> in(ndev, std::vector<int32_t>(count)), out(ndev, std::vector<int32_t>(count));
      for (int d = 0; d < ndev; ++d)
        for (size_t i = 0; i < count; ++i) in[d][i] = static_cast<int32_t>(mix(salt, i) % 100) + d;
      call("cclGroupStart", [] { return cclGroupStart(); });
      for (int d = 0; d < ndev; ++d)
        call("cclAllReduce",
             [&] { return cclAllReduce(in[d].data(), out[d].data(), count, cclInt32, cclSum, comms[d], nullptr); });
      if (call("cclGroupEnd", [] { return cclGroupEnd(); }) != cclSuccess) {
        problem("a group of allreduces over cclCommInitAll's communicators failed: " + lastError());
      } else {
        for (int d = 0; d < ndev; ++d)
          for (size_t i = 0; i < count; ++i)
            if (out[d][i] != ndev * static_cast<int32_t>(mix(salt, i) % 100) + ndev * (ndev - 1) / 2) {
              problem("wrong allreduce over cclCommInitAll's communicators");
              d = ndev;
              break;
            }
      }
      for (int d = 0; d < ndev; ++d) call("cclCommDestroy", [&] { return cclCommDestroy(comms[d]); });
    });
    return;
  }
  // Ranks that disagree at init: one claims another nranks, or two claim one rank.
  cclUniqueId id;
  fuzz::bindSlot(kMainSlot);
  if (call("cclGetUniqueId", [&] { return cclGetUniqueId(&id); }) != cclSuccess) return;
  const int odd = static_cast<int>(g.below(n));
  const bool dupRank = k == 9 && n > 1;
  std::vector<cclResult_t> rcs(n);
  w.run([&](int r) {
    cclComm_t c = reinterpret_cast<cclComm_t>(0x6);
    const int nr = !dupRank && r == odd ? n + 1 : n;
    const int rank = dupRank && r == odd ? (r + 1) % n : r;
    rcs[r] = call("cclCommInitRank", [&] { return cclCommInitRank(&c, nr, id, rank); });
    if (rcs[r] == cclSuccess)
      call("cclCommDestroy", [&] { return cclCommDestroy(c); });
    else if (c != reinterpret_cast<cclComm_t>(0x6))
      problem("cclCommInitRank failed but wrote *comm");
  });
  for (int r = 0; r < n; ++r)
    if (rcs[r] == cclSuccess)
      problem(std::string("rank ") + std::to_string(r) + " joined a communicator whose ranks " +
              (dupRank ? "claim one rank twice" : "disagree on nranks"));
}

// Calls that disagree across ranks: a different count, type, op, root or collective on one
// rank, or one rank not calling at all. Every rank must return in time and no buffer be
// overrun; the communicator is then replaced.
void mismatchStep(World& w, Rng& g) {
  const int n = w.size();
  Step base;
  base.main = randomSpec(g, n, false);
  Spec& s = base.main;
  s.count = 1 + g.below(g.chance(0.5) ? 64 : 20000);
  s.layout = Layout::kSeparate;
  s.stream = StreamKind::kNone;
  s.misalignSend = s.misalignRecv = 0;
  base.depth = fnInfo(s.fn).base == Base::kSendRecv ? 1 : 0;
  const int victim = static_cast<int>(g.below(n));
  Step odd = base;
  const uint64_t how = g.below(6);
  std::string what;
  switch (how) {
    case 0:
      odd.main.count = g.chance(0.5) ? s.count * 2 + 1 : std::max<size_t>(1, s.count / 2);
      what = "a different count";
      break;
    case 1:
      odd.main.dtype = (s.dtype + 1 + static_cast<int>(g.below(cclNumTypes - 1))) % cclNumTypes;
      what = "a different datatype";
      break;
    case 2:
      odd.main.op = (s.op + 1) % cclNumOps;
      odd.main.root = (s.root + 1) % n;
      odd.main.shift = (s.shift + 1) % n;
      what = "a different op/root/peer";
      break;
    case 3:
      odd.main.fn = static_cast<Fn>(g.below(static_cast<uint64_t>(Fn::kNum)));
      odd.depth = fnInfo(odd.main.fn).base == Base::kSendRecv ? 1 : 0;
      what = std::string("a different call (") + fnInfo(odd.main.fn).name + ")";
      break;
    case 4:
      odd.main.codecKind = CodecKind::kRandom;
      odd.main.codec = randomCompression(g);
      odd.main.fn = Fn::kAllReduceEx;
      base.main.fn = Fn::kAllReduceEx;
      base.main.dtype = odd.main.dtype = cclFloat32;
      what = "a different codec";
      break;
    default:
      what = "no call at all";
      break;
  }
  std::vector<RankOutcome> outcomes(n);
  const uint64_t seed = g.next();
  const auto start = fuzz::Clock::now();
  w.run([&](int r) {
    if (r == victim && how == 5) return;
    runRank(r == victim ? odd : base, w, r, mix(seed, r), outcomes[r]);
  });
  const double took = std::chrono::duration<double>(fuzz::Clock::now() - start).count();
  std::fprintf(stderr, "step %llu: mismatch (%s on rank %d of %d: %s) returned in %.2f s\n",
               static_cast<unsigned long long>(stepNo.load()), what.c_str(), victim, n, describe(s).c_str(), took);
  w.tainted = true;  // whatever happened, the ranks may be out of step: a new communicator
  w.keepAlive.push_back(std::make_shared<std::vector<RankOutcome>>(std::move(outcomes)));
}

// Valid, checked calls: the communicator still works after what it refused.
void healthStep(World& w, Rng& g) {
  static const Fn fns[] = {Fn::kAllReduce, Fn::kBroadcast, Fn::kAllGather};
  Step st;
  st.main.fn = fns[g.below(3)];
  st.main.count = 1 + g.below(3000);
  st.main.dtype = g.chance(0.5) ? cclInt32 : cclFloat64;
  st.main.op = static_cast<int>(g.below(cclNumOps));
  st.main.root = static_cast<int>(g.below(w.size()));
  st.main.salt = g.next();
  runStep(w, st, g);
}

}  // namespace

int main(int argc, char** argv) {
  const fuzz::Options opt = fuzz::parseOptions(argc, argv, "--inputs", 2000);
  // A short deadline turns a call that waits for a peer that never comes into an error in
  // seconds; the fuzzer's refused calls log nothing unless asked for.
  setenv("CCL_TIMEOUT", "3", 0);
  setenv("CCL_DEBUG", "NONE", 0);
  seedValue = opt.seed;
  misalignBytes = opt.misalignBytes;
  const uint64_t batch = opt.batch ? opt.batch : 1000;
  const int mismatchEvery = opt.mismatchEvery ? opt.mismatchEvery : 150;
  Rng fill(mix(opt.seed, 0xbad));
  for (auto& b : garbageComm) b = static_cast<unsigned char>(fill.next());
  for (auto& b : fakeStreamBytes) b = static_cast<unsigned char>(fill.next());

  fuzz::installCrashReport(kKind, &trialNo);
  fuzz::bindSlot(kMainSlot);
  fuzz::startWatchdog(kKind, &tally, &trialNo, std::chrono::milliseconds(1000 * (fuzz::cclTimeoutSeconds() + 5)),
                      context);

  Rng master(opt.seed);
  const auto start = fuzz::Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(fuzz::Clock::now() - start).count(); };
  uint64_t total = 0, worlds = 0, mismatches = 0;
  bool allOk = true;
  std::unique_ptr<World> world;
  int failedInits = 0;
  auto summary = [&] {
    return std::to_string(tally.inputs.load()) + " calls; " + std::to_string(worlds) + " communicators made, " +
           std::to_string(mismatches) + " mismatched calls so far; " + context();
  };
  for (uint64_t step = 1;; ++step) {
    const bool budgetLeft =
        (opt.count == 0 || total + tally.inputs < opt.count) && (opt.seconds == 0 || elapsed() < opt.seconds);
    if (!budgetLeft) break;
    stepNo = step;
    if (!world) {
      world = std::make_unique<World>(static_cast<int>(master.range(2, kMaxRanks)));
      ++worlds;
      if (!initWorld(*world, master)) {
        world.reset();
        if (++failedInits > 3) break;
        continue;
      }
    }
    World& w = *world;
    if (step % mismatchEvery == 0) {
      mismatchStep(w, master);
      ++mismatches;
    } else {
      const uint64_t k = master.below(100);
      if (k < 40) {
        const uint64_t seed = master.next();
        const int calls = 24;
        w.run([&](int r) {
          Rng g(mix(seed, r));
          for (int i = 0; i < calls && !w.tainted; ++i) miscCall(g, w, r);
        });
      } else if (k < 55) {
        runStep(w, randomStep(master, w.size(), true), master);
      } else if (k < 85) {
        runStep(w, randomStep(master, w.size(), false), master);
      } else if (k < 90) {
        healthStep(w, master);
      } else if (k < 93) {
        setCompressionStep(w, master);
      } else if (k < 96) {
        splitStep(w, master);
      } else if (k < 98) {
        initStep(w, master);
      } else {
        abortStep(w, master);
      }
    }
    if (w.tainted) {
      // Calls on a failed communicator are refused (destroy or abort it), then a new one.
      w.run([&](int r) {
        cclResult_t a = cclSuccess;
        call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(w.comm[r], &a); });
        if (a == cclSuccess) return;
        int32_t v = 1, out = 0;
        expectRefused("cclAllReduce on a failed communicator", call("cclAllReduce", [&] {
                        return cclAllReduce(&v, &out, 1, cclInt32, cclSum, w.comm[r], nullptr);
                      }));
      });
      destroyWorld(w);
      world.reset();
    } else if (step % 25 == 0) {
      healthStep(w, master);
    }
    if (tally.inputs >= batch) {
      total += tally.inputs;
      allOk = fuzz::emitLine(kKind, trialNo, tally, summary()) && allOk;
      tally.reset();
      ++trialNo;
    }
  }
  if (world) destroyWorld(*world);
  world.reset();
  if (tally.inputs > 0 || trialNo == 0) {
    total += tally.inputs;
    allOk = fuzz::emitLine(kKind, trialNo, tally, summary()) && allOk;
  }
  std::fprintf(stderr, "api_fuzz: %llu calls in %.1f s (%.0f calls/s), %llu communicators, %llu mismatch steps\n",
               static_cast<unsigned long long>(total), elapsed(), static_cast<double>(total) / elapsed(),
               static_cast<unsigned long long>(worlds), static_cast<unsigned long long>(mismatches));
  return allOk ? 0 : 1;
}
