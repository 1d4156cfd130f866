// SPDX-License-Identifier: BSD-3-Clause
// What the files of api_fuzz share: the contract every call is judged by, element values,
// guarded buffers, the calls as specs, the world of ranks, and the steps main draws from.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "fuzz_common.h"

namespace apifuzz {

using fuzz::InCall;
using fuzz::mix;
using fuzz::Rng;

constexpr int kMaxRanks = 4;
constexpr int kMainSlot = 8;  // watch slot of the main thread (ranks use 0 .. kMaxRanks-1)

// ---------------------------------------------------------------------------------------
// The contract of every call (api_fuzz_judge.cc).

extern fuzz::Tally tally;
extern std::atomic<uint64_t> stepNo;
extern uint64_t seedValue;

// Where the fuzzer is (step and --seed), for every report.
std::string context();
void problem(const std::string& what);

// A communicator handle that is not one, and a stream handle that was never made by
// cclHostStreamCreate; their bytes come from fillGarbage.
cclComm_t garbage();
cclStream_t fakeStream();
void fillGarbage(uint64_t seed);

std::string lastError();

// The contract of every call's result: a ccl code; a failure leaves a message naming the
// function in cclGetLastError.
cclResult_t judge(const char* fn, cclResult_t rc, bool inProgressOk = false);

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
void judgeName(const char* fn, const char* name);

void expectRefused(const std::string& what, cclResult_t rc);

// ---------------------------------------------------------------------------------------
// Element types: exact small integers in every checked type (api_fuzz_values.cc).

size_t typeSize(int t);
const char* typeName(int t);
// Element i of a buffer of type t, as a double (fp8 is written, never read back: NAN).
void put(void* p, int t, size_t i, double v);
double get(const void* p, int t, size_t i);

// A buffer between guard bytes. The guards (and the bytes a misaligned payload skips) hold a
// position-dependent pattern, so a write of any shifted copy is seen.
class Guarded {
 public:
  static constexpr size_t kGuard = 64;
  Guarded(size_t bytes, size_t shift);
  uint8_t* data() { return mem_.data() + kGuard + shift_; }
  const uint8_t* data() const { return mem_.data() + kGuard + shift_; }
  size_t bytes() const { return bytes_; }
  // The offset (from the payload, negative before it) of the first changed guard byte.
  std::optional<long> hit() const;

 private:
  static uint8_t pattern(size_t j) { return static_cast<uint8_t>(0xa5 ^ (j * 0x3b)); }
  size_t bytes_, shift_;
  std::vector<uint8_t> mem_;
};

// ---------------------------------------------------------------------------------------
// The calls: each collective's buffers as ccl.h defines them (api_fuzz_specs.cc).

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

const BaseInfo& baseInfo(Base b);

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

const FnInfo& fnInfo(Fn f);

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

std::string describe(const Spec& s);

// The value rank `src` holds at element i of its send buffer: small integers, exact in every
// checked type and in every sum over 4 ranks; 1 or 2 for products.
double sendValue(const Spec& s, int src, size_t i);
// What rank r's receive buffer holds at element j after the call; nullopt: what it held before.
std::optional<double> expectedAt(const Spec& s, int r, int n, size_t j);
// Whether a successful call's results can be checked exactly.
bool checkable(const Spec& s, bool lossyDefault);

// Random codec parameters; parameters the header says are invalid, one field at a time
// (`why` names it).
cclCompression_t randomCompression(Rng& g);
cclCompression_t invalidCompression(Rng& g, std::string* why);

// A random call on n ranks. `mustFail`: one argument the header says makes the call fail,
// refused on every rank alike (the call may run on one rank only).
Spec randomSpec(Rng& g, int n, bool mustFail);

// ---------------------------------------------------------------------------------------
// The world: n ranks as persistent threads, each with its communicator, host stream and
// error-feedback handles (api_fuzz_world.cc).

class World {
 public:
  explicit World(int n);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const { return n_; }

  // Runs fn(rank) on every rank's thread at once and waits for all.
  void run(const std::function<void(int)>& fn);

  cclComm_t comm[kMaxRanks] = {};
  cclStream_t stream[kMaxRanks] = {};
  cclFeedback_t feedback[kMaxRanks][2] = {};
  bool lossyDefault = false;         // a lossy default codec may compress floating-point calls
  std::atomic<bool> tainted{false};  // a call failed inside the communicator: make a new one
  // What calls of a failed communicator may still point at, freed after it is destroyed.
  std::vector<std::shared_ptr<void>> keepAlive;

 private:
  void loop(int r);

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

void randomValidConfig(Rng& g, int rank, int hostGroups, ConfigHolder* h);

// Makes every rank's communicator (three ways), host stream and feedback handles.
bool initWorld(World& w, Rng& g);
void destroyWorld(World& w);

// ---------------------------------------------------------------------------------------
// One rank's part of a call: its buffers, filled, and what they held before; steps of calls
// on every rank (api_fuzz_calls.cc).

struct Buffers {
  std::vector<std::unique_ptr<Guarded>> blocks;
  std::vector<std::vector<uint8_t>> before;  // each block's payload after filling
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t recvElems = 0;
  std::vector<uint8_t> recvBefore;
};

// --misalign bytes: buffers may start inside an element (api_fuzz_calls.cc, misalignUnit).
extern bool misalignBytes;

// Rank r's buffers for `s` (an overlapping layout draws its offsets from g), filled.
void build(const Spec& s, int r, int n, Rng& g, Buffers& b);
// Where a call wrote outside its buffers, or "".
std::string guardReport(const Buffers& b, const std::string& what);
bool unchanged(const Buffers& b);
// The first failure of two results.
cclResult_t first(cclResult_t a, cclResult_t b);
// Issues the call of `s` on rank r with buffers `b`.
cclResult_t issue(const Spec& s, const Buffers& b, World& w, int r);

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

// Rank r's part of `st`, its buffers drawn from rankSeed.
void runRank(const Step& st, World& w, int r, uint64_t rankSeed, RankOutcome& o);
// Runs `st` on every rank and judges the outcome. Marks the world tainted when the
// communicator may be out of step.
void runStep(World& w, const Step& st, Rng& master);
Step randomStep(Rng& g, int n, bool mustFail);

// ---------------------------------------------------------------------------------------
// Calls that need no peer (api_fuzz_misc.cc), those about a communicator among them
// (api_fuzz_misc_comm.cc): each draws its arguments from g and runs on rank r alone.

// Small and extreme ints, and any other.
int randomInt(Rng& g);
// One of them, drawn from g (tryRefusedCall four times as often as each of the others).
void miscCall(Rng& g, World& w, int r);

void tryQueries(Rng& g, World& w, int r);
void tryTopology(Rng& g, World& w, int r);
void tryStats(Rng& g, World& w, int r);
void tryBadComms(Rng& g, World& w, int r);
void tryBadCompression(Rng& g, World& w, int r);
void tryBadInit(Rng& g, World& w, int r);
void tryBadInitAll(Rng& g, World& w, int r);
void tryBadConfig(Rng& g, World& w, int r);
// A call the header says must fail, on this rank alone.
void tryRefusedCall(Rng& g, World& w, int r);

// ---------------------------------------------------------------------------------------
// Steps of several ranks: codecs, split, finalize, abort, init, mismatch (api_fuzz_steps.cc).

// A new default codec on every rank: invalid (refused by all), random, none or NULL.
void setCompressionStep(World& w, Rng& g);
// A split with arguments every rank refuses, or by random colors and keys: each new
// communicator is checked, then finalized or destroyed.
void splitStep(World& w, Rng& g);
// Abort: one rank aborts its part of a new communicator while the others (or its own host
// stream) wait in an allreduce on it. Every waiting call must fail in time, and the parent
// communicator stay healthy.
void abortStep(World& w, Rng& g);
// One-rank communicators with random configurations, cclCommInitAll, and inits whose ranks
// disagree (every rank must fail, quickly where the root can tell).
void initStep(World& w, Rng& g);
// Calls that disagree across ranks: a different count, type, op, root or collective on one
// rank, or one rank not calling at all. Every rank must return in time and no buffer be
// overrun; the communicator is then replaced.
void mismatchStep(World& w, Rng& g);
// Valid, checked calls: the communicator still works after what it refused.
void healthStep(World& w, Rng& g);

}  // namespace apifuzz
