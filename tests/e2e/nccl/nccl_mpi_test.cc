// SPDX-License-Identifier: BSD-3-Clause
// Every NCCL collective on host buffers, run by MPI processes (one rank each) as a program
// written for NCCL runs: it includes only NVIDIA's nccl.h and mpi.h, rank 0 makes the id with
// ncclGetUniqueId and MPI_Bcast hands it out. Whichever libnccl.so.2 the environment loads
// serves the calls (ccl's drop-in, or ccl preloaded in front of NVIDIA's).
//
//   --exact          integer-valued data: every result is compared bit for bit
//   --bound <codec>  fp32 data is random in [-1, 1); float results must lie within the codec's
//                    documented bound composed over the algorithm (plus fp rounding of the
//                    sums); integer results stay exact, and so do the moves (broadcast,
//                    all-gather, all-to-all, send/recv) that CCL_COMPRESS does not list
//                    (unset: only the gradient reductions are compressed)
//   --dump <prefix>  as --bound none, and every rank writes its results to <prefix>.rank<r>
//                    so that two runs can be compared with cmp
//   --any-algorithm  with --bound: a compressed allreduce may be any of the library's, the
//                    ring's composition (the largest) bounds it (CCL_CODEC=auto chooses the
//                    algorithm by cost); otherwise it is the two-shot's, the default choice
//
// Every rank issues the same calls whatever it finds; a failed NCCL call aborts the job
// (MPI_Abort), a wrong result is recorded, and at the end every rank exits 1 if any rank
// found one, after printing its first mismatch.
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nccl_mpi_values.h"

namespace nccl_mpi {
namespace {

enum class Mode { kExact, kBound, kDump };

struct Options {
  Mode mode = Mode::kExact;
  std::string codec = "none";
  std::string dumpPrefix;
  bool anyAlgorithm = false;
};

bool parseOptions(int argc, char** argv, Options* o) {
  int modes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--exact") {
      o->mode = Mode::kExact;
    } else if (a == "--bound" && i + 1 < argc) {
      o->mode = Mode::kBound;
      o->codec = argv[++i];
    } else if (a == "--dump" && i + 1 < argc) {
      o->mode = Mode::kDump;
      o->dumpPrefix = argv[++i];
    } else if (a == "--any-algorithm") {
      o->anyAlgorithm = true;
      continue;
    } else {
      return false;
    }
    ++modes;
  }
  double unused = 0;
  return modes == 1 && quantBound(o->codec, 1, &unused);
}

const char* opName(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= ncclSum && op <= ncclAvg ? names[op] : "?";
}

// What ccl's communicator may carry compressed: fp32/bf16/fp16, summed or moved.
bool codecType(ncclDataType_t t) { return t == ncclFloat32 || t == ncclFloat16 || t == ncclBfloat16; }
bool codecOp(ncclRedOp_t op) { return op == ncclSum || op == ncclAvg; }

using Bytes = std::vector<unsigned char>;

// The reference of a reduction over all ranks' inputs, per element, with what its bound needs.
struct Reduced {
  std::vector<double> want;
  std::vector<double> sumAbs;  // sum of |input| over ranks: scale of the rounding error
  double maxIn = 0;            // largest |input| anywhere: bounds every block's absmax
  double maxSum = 0;           // largest |sum| anywhere: bounds the absmax of a quantized sum
};

class Suite {
 public:
  Suite(ncclComm_t comm, int rank, int nranks, const Options& opt, FILE* dump)
      : comm_(comm), rank_(rank), n_(nranks), opt_(opt), dump_(dump) {}

  void runAll();
  bool failed() const { return failed_; }
  const std::string& firstFailure() const { return first_; }
  long long checked() const { return checked_; }
  // The largest |error| / tolerance of a float result with a nonzero tolerance (at most 1
  // when nothing failed): how much of the bound the results use.
  double worstRatio() const { return worst_; }

 private:
  // ---- inputs, a function of (call, rank, index) so every rank knows every rank's input
  bool random(ncclDataType_t t) const { return opt_.mode != Mode::kExact && t == ncclFloat32; }
  double reduceIn(ncclDataType_t t, ncclRedOp_t op, int r, size_t i) const {
    const uint64_t h = mix(salt_, r, i);
    return roundTo(t, random(t) ? randomInput(h) : exactInput(op, n_, r, h));
  }
  double moveIn(ncclDataType_t t, int r, size_t i) const {
    const uint64_t h = mix(salt_, r, i);
    return roundTo(t, random(t) ? randomInput(h) : moveInput(h));
  }
  static Bytes fill(ncclDataType_t t, size_t count, const std::function<double(size_t)>& f) {
    Bytes b(count * typeSize(t));
    for (size_t i = 0; i < count; ++i) set(t, b.data(), i, f(i));
    return b;
  }
  // A buffer the call must overwrite: 0xA5 bytes, a pattern no expected value of this test has.
  static Bytes garbage(ncclDataType_t t, size_t count) { return Bytes(count * typeSize(t), 0xA5); }
  Reduced reduced(ncclDataType_t t, ncclRedOp_t op, size_t count) const;
  double maxMoved(ncclDataType_t t, size_t count, int onlyRank = -1) const;

  // ---- bounds
  double q(double m) const {
    double b = 0;
    quantBound(opt_.codec, m, &b);
    return b;
  }
  double allReduceTerm(ncclDataType_t t, ncclRedOp_t op, const Reduced& r) const {
    if (!codecType(t) || !codecOp(op)) return 0;
    if (opt_.anyAlgorithm) {
      // Ring: the partial sum of k inputs is quantised on its k-th hop, then the sum once.
      double hops = 0;
      for (int k = 1; k < n_; ++k) hops += q(k * r.maxIn + hops);
      return hops + q(r.maxSum + hops);
    }
    const double peers = (n_ - 1) * q(r.maxIn);  // two-shot: peers' shards once, then the sum once
    return peers + q(r.maxSum + peers);
  }
  double reduceScatterTerm(ncclDataType_t t, ncclRedOp_t op, const Reduced& r) const {
    return codecType(t) && codecOp(op) ? (n_ - 1) * q(r.maxIn) : 0;
  }
  double tol(ncclDataType_t t, double codecTerm, double magnitude) const {
    if (!isFloat(t) || opt_.mode == Mode::kExact) return 0;
    return codecTerm * (1 + 1e-6) + 4.0 * n_ * unitRoundoff(t) * (magnitude + codecTerm);
  }
  // A moved element (broadcast, all-gather, all-to-all, send/recv: no arithmetic): within one
  // quantization of its block where CCL_COMPRESS lists the collective, else bit for bit.
  double moveTol(ncclDataType_t t, const char* kind, double maxIn, double magnitude) const {
    if (!codecType(t) || !compressedKind(kind)) return 0;
    return tol(t, q(maxIn), magnitude);
  }

  // ---- checks
  void begin(const std::string& what) {
    ++salt_;
    what_ = what;
  }
  void ok(ncclResult_t r, const char* fn) const;
  void expect(ncclDataType_t t, const void* buf, size_t i, double want, double tolerance);
  void fail(const std::string& message);
  void agree(const Bytes& b);
  void dump(const void* buf, size_t bytes);

  // ---- the calls
  void allReduce(ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace);
  void broadcast(ncclDataType_t t, size_t count, int root, bool inPlace, bool legacy = false);
  void reduce(ncclDataType_t t, ncclRedOp_t op, size_t count, int root, bool inPlace);
  void allGather(ncclDataType_t t, size_t count, bool inPlace);
  void reduceScatter(ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace);
  void alltoAll(ncclDataType_t t, size_t count);
  void gather(ncclDataType_t t, size_t count, int root, bool inPlace);
  void scatter(ncclDataType_t t, size_t count, int root, bool inPlace);
  void sendRecvRing(ncclDataType_t t, size_t count);

  ncclComm_t comm_;
  int rank_;
  int n_;
  Options opt_;
  FILE* dump_;
  uint64_t salt_ = 0;
  std::string what_;
  bool failed_ = false;
  std::string first_;
  long long checked_ = 0;
  double worst_ = 0;
};

Reduced Suite::reduced(ncclDataType_t t, ncclRedOp_t op, size_t count) const {
  Reduced out;
  out.want.resize(count);
  out.sumAbs.resize(count);
  for (size_t i = 0; i < count; ++i) {
    double acc = 0, sum = 0, abs = 0;
    for (int r = 0; r < n_; ++r) {
      const double x = reduceIn(t, op, r, i);
      if (r == 0)
        acc = x;
      else if (op == ncclProd)
        acc *= x;
      else if (op == ncclMax)
        acc = std::max(acc, x);
      else if (op == ncclMin)
        acc = std::min(acc, x);
      else
        acc += x;
      sum += x;
      abs += std::fabs(x);
      out.maxIn = std::max(out.maxIn, std::fabs(x));
    }
    if (op == ncclAvg) acc = isFloat(t) ? acc / n_ : std::trunc(acc / n_);
    out.want[i] = acc;
    out.sumAbs[i] = abs;
    out.maxSum = std::max(out.maxSum, std::fabs(sum));
  }
  return out;
}

double Suite::maxMoved(ncclDataType_t t, size_t count, int onlyRank) const {
  double m = 0;
  for (int r = 0; r < n_; ++r)
    if (onlyRank < 0 || r == onlyRank)
      for (size_t i = 0; i < count; ++i) m = std::max(m, std::fabs(moveIn(t, r, i)));
  return m;
}

void Suite::ok(ncclResult_t r, const char* fn) const {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "rank %d: %s: %s returned %d (%s): %s\n", rank_, what_.c_str(), fn, static_cast<int>(r),
               ncclGetErrorString(r), ncclGetLastError(comm_));
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

void Suite::fail(const std::string& message) {
  if (!failed_) first_ = "rank " + std::to_string(rank_) + ": " + what_ + ": " + message;
  failed_ = true;
}

void Suite::expect(ncclDataType_t t, const void* buf, size_t i, double want, double tolerance) {
  ++checked_;
  const size_t es = typeSize(t);
  bool good;
  if (isFloat(t) && opt_.mode != Mode::kExact) {
    const double err = std::fabs(get(t, buf, i) - want);
    good = err <= tolerance;  // false for NaN
    if (tolerance > 0) worst_ = std::max(worst_, err / tolerance);
  } else {
    unsigned char bits[8];
    set(t, bits, 0, want);
    good = std::memcmp(bits, static_cast<const unsigned char*>(buf) + i * es, es) == 0;
  }
  if (good || failed_) return;
  char msg[256];
  std::snprintf(msg, sizeof(msg), "element %zu is %.9g, expected %.9g (tolerance %.3g)", i, get(t, buf, i), want,
                tolerance);
  fail(msg);
}

// Every rank must hold the same bytes (compressed results are decoded the same everywhere).
void Suite::agree(const Bytes& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : b) h = (h ^ c) * 0x100000001b3ull;
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (lo != hi) fail("the ranks' results differ");
}

void Suite::dump(const void* buf, size_t bytes) {
  if (dump_ && bytes > 0 && std::fwrite(buf, 1, bytes, dump_) != bytes) fail("writing the dump file failed");
}

void Suite::allReduce(ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace) {
  begin(std::string("ncclAllReduce ") + typeName(t) + " " + opName(op) + " count " + std::to_string(count) +
        (inPlace ? " in place" : ""));
  Bytes send = fill(t, count, [&](size_t i) { return reduceIn(t, op, rank_, i); });
  Bytes recv = inPlace ? send : garbage(t, count);
  ok(ncclAllReduce(inPlace ? recv.data() : send.data(), recv.data(), count, t, op, comm_, nullptr), "ncclAllReduce");
  const Reduced ref = reduced(t, op, count);
  const double term = allReduceTerm(t, op, ref);
  for (size_t i = 0; i < count; ++i) expect(t, recv.data(), i, ref.want[i], tol(t, term, ref.sumAbs[i]));
  agree(recv);
  dump(recv.data(), recv.size());
}

void Suite::broadcast(ncclDataType_t t, size_t count, int root, bool inPlace, bool legacy) {
  begin(std::string(legacy ? "ncclBcast " : "ncclBroadcast ") + typeName(t) + " count " + std::to_string(count) +
        " root " + std::to_string(root) + (inPlace ? " in place" : ""));
  Bytes send = fill(t, count, [&](size_t i) { return moveIn(t, rank_, i); });
  Bytes recv = inPlace && rank_ == root ? send : garbage(t, count);
  if (legacy)
    ok(ncclBcast(recv.data(), count, t, root, comm_, nullptr), "ncclBcast");
  else
    ok(ncclBroadcast(inPlace ? recv.data() : send.data(), recv.data(), count, t, root, comm_, nullptr),
       "ncclBroadcast");
  const double m = maxMoved(t, count, root);
  for (size_t i = 0; i < count; ++i) {
    const double x = moveIn(t, root, i);
    expect(t, recv.data(), i, x, moveTol(t, "broadcast", m, std::fabs(x)));
  }
  dump(recv.data(), recv.size());
}

// Reduce is never compressed by ccl: float results differ from the reference by rounding only.
void Suite::reduce(ncclDataType_t t, ncclRedOp_t op, size_t count, int root, bool inPlace) {
  begin(std::string("ncclReduce ") + typeName(t) + " " + opName(op) + " count " + std::to_string(count) + " root " +
        std::to_string(root) + (inPlace ? " in place" : ""));
  Bytes send = fill(t, count, [&](size_t i) { return reduceIn(t, op, rank_, i); });
  Bytes recv = inPlace ? send : garbage(t, count);
  // NCCL lets non-root ranks pass a NULL recvbuff; the out-of-place variant does so.
  void* out = inPlace || rank_ == root ? recv.data() : nullptr;
  ok(ncclReduce(inPlace ? recv.data() : send.data(), out, count, t, op, root, comm_, nullptr), "ncclReduce");
  if (rank_ != root) return;
  const Reduced ref = reduced(t, op, count);
  for (size_t i = 0; i < count; ++i) expect(t, recv.data(), i, ref.want[i], tol(t, 0, ref.sumAbs[i]));
  dump(recv.data(), recv.size());
}

void Suite::allGather(ncclDataType_t t, size_t count, bool inPlace) {
  begin(std::string("ncclAllGather ") + typeName(t) + " count " + std::to_string(count) + (inPlace ? " in place" : ""));
  const size_t es = typeSize(t);
  Bytes send = fill(t, count, [&](size_t i) { return moveIn(t, rank_, i); });
  Bytes recv = garbage(t, count * n_);
  if (inPlace) std::copy(send.begin(), send.end(), recv.begin() + rank_ * count * es);
  const void* src = inPlace ? recv.data() + rank_ * count * es : send.data();
  ok(ncclAllGather(src, recv.data(), count, t, comm_, nullptr), "ncclAllGather");
  const double m = maxMoved(t, count);
  for (int r = 0; r < n_; ++r)
    for (size_t i = 0; i < count; ++i) {
      const double x = moveIn(t, r, i);
      expect(t, recv.data(), r * count + i, x, moveTol(t, "allgather", m, std::fabs(x)));
    }
  agree(recv);
  dump(recv.data(), recv.size());
}

void Suite::reduceScatter(ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace) {
  begin(std::string("ncclReduceScatter ") + typeName(t) + " " + opName(op) + " recvcount " + std::to_string(count) +
        (inPlace ? " in place" : ""));
  const size_t es = typeSize(t);
  Bytes send = fill(t, count * n_, [&](size_t i) { return reduceIn(t, op, rank_, i); });
  Bytes recv = inPlace ? send : garbage(t, count);
  const void* src = inPlace ? recv.data() : send.data();
  unsigned char* dst = inPlace ? recv.data() + rank_ * count * es : recv.data();
  ok(ncclReduceScatter(src, dst, count, t, op, comm_, nullptr), "ncclReduceScatter");
  const Reduced ref = reduced(t, op, count * n_);
  const double term = reduceScatterTerm(t, op, ref);
  for (size_t i = 0; i < count; ++i) {
    const size_t j = rank_ * count + i;
    expect(t, dst, i, ref.want[j], tol(t, term, ref.sumAbs[j]));
  }
  dump(dst, count * es);
}

void Suite::alltoAll(ncclDataType_t t, size_t count) {
  begin(std::string("ncclAlltoAll ") + typeName(t) + " count " + std::to_string(count));
  Bytes send = fill(t, count * n_, [&](size_t i) { return moveIn(t, rank_, i); });
  Bytes recv = garbage(t, count * n_);
  ok(ncclAlltoAll(send.data(), recv.data(), count, t, comm_, nullptr), "ncclAlltoAll");
  double m = 0;
  for (int r = 0; r < n_; ++r)
    for (size_t i = 0; i < count * n_; ++i) m = std::max(m, std::fabs(moveIn(t, r, i)));
  for (int r = 0; r < n_; ++r)
    for (size_t i = 0; i < count; ++i) {
      const double x = moveIn(t, r, rank_ * count + i);
      expect(t, recv.data(), r * count + i, x, moveTol(t, "alltoall", m, std::fabs(x)));
    }
  dump(recv.data(), recv.size());
}

// Gather and scatter are never compressed by ccl.
void Suite::gather(ncclDataType_t t, size_t count, int root, bool inPlace) {
  begin(std::string("ncclGather ") + typeName(t) + " count " + std::to_string(count) + " root " + std::to_string(root) +
        (inPlace ? " in place" : ""));
  const size_t es = typeSize(t);
  Bytes send = fill(t, count, [&](size_t i) { return moveIn(t, rank_, i); });
  Bytes recv = garbage(t, rank_ == root ? count * n_ : 0);
  const void* src = send.data();
  if (inPlace && rank_ == root) {
    std::copy(send.begin(), send.end(), recv.begin() + root * count * es);
    src = recv.data() + root * count * es;
  }
  ok(ncclGather(src, rank_ == root ? recv.data() : nullptr, count, t, root, comm_, nullptr), "ncclGather");
  if (rank_ != root) return;
  for (int r = 0; r < n_; ++r)
    for (size_t i = 0; i < count; ++i) expect(t, recv.data(), r * count + i, moveIn(t, r, i), 0);
  dump(recv.data(), recv.size());
}

void Suite::scatter(ncclDataType_t t, size_t count, int root, bool inPlace) {
  begin(std::string("ncclScatter ") + typeName(t) + " count " + std::to_string(count) + " root " +
        std::to_string(root) + (inPlace ? " in place" : ""));
  const size_t es = typeSize(t);
  Bytes send = rank_ == root ? fill(t, count * n_, [&](size_t i) { return moveIn(t, root, i); }) : Bytes();
  Bytes recv = garbage(t, count);
  unsigned char* dst = inPlace && rank_ == root ? send.data() + root * count * es : recv.data();
  ok(ncclScatter(rank_ == root ? send.data() : nullptr, dst, count, t, root, comm_, nullptr), "ncclScatter");
  for (size_t i = 0; i < count; ++i) expect(t, dst, i, moveIn(t, root, rank_ * count + i), 0);
  dump(dst, count * es);
}

// A ring in both directions inside one group: elements [0, count) of each rank's input go to
// the next rank, [count, 2 count) to the previous one.
void Suite::sendRecvRing(ncclDataType_t t, size_t count) {
  begin(std::string("ncclSend/ncclRecv ring ") + typeName(t) + " count " + std::to_string(count));
  const size_t es = typeSize(t);
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  Bytes send = fill(t, 2 * count, [&](size_t i) { return moveIn(t, rank_, i); });
  Bytes fromPrev = garbage(t, count), fromNext = garbage(t, count);
  ok(ncclGroupStart(), "ncclGroupStart");
  ok(ncclSend(send.data(), count, t, next, comm_, nullptr), "ncclSend");
  ok(ncclSend(send.data() + count * es, count, t, prev, comm_, nullptr), "ncclSend");
  ok(ncclRecv(fromPrev.data(), count, t, prev, comm_, nullptr), "ncclRecv");
  ok(ncclRecv(fromNext.data(), count, t, next, comm_, nullptr), "ncclRecv");
  ok(ncclGroupEnd(), "ncclGroupEnd");
  const double m = maxMoved(t, 2 * count);
  for (size_t i = 0; i < count; ++i) {
    const double a = moveIn(t, prev, i), b = moveIn(t, next, count + i);
    expect(t, fromPrev.data(), i, a, moveTol(t, "send", m, std::fabs(a)));
    expect(t, fromNext.data(), i, b, moveTol(t, "send", m, std::fabs(b)));
  }
  dump(fromPrev.data(), fromPrev.size());
  dump(fromNext.data(), fromNext.size());
}

void Suite::runAll() {
  const size_t kOdd = 997;
  // Above CCL_CODEC_MIN_BYTES (64 KiB by default) for every type, per rank too, so a codec
  // applies: 4 MiB and 1 MiB of fp32 (odd counts).
  const size_t kLarge = (size_t{1} << 20) + 3;
  const size_t kMedium = (size_t{1} << 18) + 3;
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (bool inPlace : {false, true}) {
    for (ncclDataType_t t : {ncclInt32, ncclUint8, ncclInt64, ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16})
      for (ncclRedOp_t op : ops) allReduce(t, op, kOdd, inPlace);
    allReduce(ncclFloat32, ncclSum, 1, inPlace);
    for (ncclDataType_t t : {ncclInt32, ncclFloat32, ncclBfloat16}) broadcast(t, kOdd, inPlace ? 0 : n_ - 1, inPlace);
    for (ncclDataType_t t : {ncclInt32, ncclFloat32, ncclFloat16})
      for (ncclRedOp_t op : {ncclSum, ncclMax, ncclAvg}) reduce(t, op, kOdd, 1 % n_, inPlace);
    for (ncclDataType_t t : {ncclInt32, ncclFloat32, ncclBfloat16}) allGather(t, kOdd, inPlace);
    for (ncclDataType_t t : {ncclInt32, ncclFloat32, ncclFloat16})
      for (ncclRedOp_t op : {ncclSum, ncclMin, ncclAvg}) reduceScatter(t, op, kOdd, inPlace);
    for (ncclDataType_t t : {ncclInt32, ncclFloat32}) {
      gather(t, kOdd, n_ / 2, inPlace);
      scatter(t, kOdd, n_ / 2, inPlace);
    }
  }
  broadcast(ncclFloat16, kOdd, n_ / 2, true, true);
  for (ncclDataType_t t : {ncclInt32, ncclFloat32, ncclBfloat16}) alltoAll(t, kOdd);
  for (ncclDataType_t t : {ncclInt32, ncclFloat32}) sendRecvRing(t, kOdd);

  // One 1M-float allreduce, reduce-scatter and allgather; the other variants smaller, which
  // keeps the references every rank computes quick on an oversubscribed machine.
  allReduce(ncclFloat32, ncclSum, kLarge, false);
  reduceScatter(ncclFloat32, ncclSum, (kLarge / n_) | 1, false);
  allGather(ncclFloat32, (kLarge / n_) | 1, false);
  allReduce(ncclFloat32, ncclSum, kMedium, true);
  allReduce(ncclFloat32, ncclAvg, kMedium, false);
  allReduce(ncclBfloat16, ncclSum, kMedium, false);
  reduceScatter(ncclFloat32, ncclSum, (kMedium / n_) | 1, true);
  allGather(ncclFloat32, (kMedium / n_) | 1, true);
}

const char* modeName(const Options& o) {
  return o.mode == Mode::kExact ? "exact" : o.mode == Mode::kDump ? "dump" : "bound";
}

int run(int argc, char** argv) {
  int rank = 0, nranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  Options opt;
  if (!parseOptions(argc, argv, &opt)) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: %s --exact | --bound <none|int8|int4|int2|fp8_e4m3|fp8_e5m2|mxfp8_e4m3> | --dump <prefix>\n",
                   argv[0]);
    return 2;
  }
  FILE* dump = nullptr;
  if (opt.mode == Mode::kDump) {
    const std::string path = opt.dumpPrefix + ".rank" + std::to_string(rank);
    dump = std::fopen(path.c_str(), "wb");
    if (!dump) std::fprintf(stderr, "rank %d: cannot write %s\n", rank, path.c_str());
  }
  int cannot = opt.mode == Mode::kDump && !dump, anyCannot = 0;
  MPI_Allreduce(&cannot, &anyCannot, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anyCannot) {
    if (dump) std::fclose(dump);
    return 2;
  }

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed: %s\n", rank, ncclGetLastError(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  Suite suite(comm, rank, nranks, opt, dump);
  suite.runAll();
  if (ncclCommDestroy(comm) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommDestroy failed: %s\n", rank, ncclGetLastError(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int bad = suite.failed();
  if (dump && std::fclose(dump) != 0) {
    std::fprintf(stderr, "rank %d: closing the dump file failed\n", rank);
    bad = 1;
  }
  if (suite.failed()) std::fprintf(stderr, "FAILED %s\n", suite.firstFailure().c_str());
  int anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  long long checked = suite.checked(), total = 0;
  MPI_Reduce(&checked, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  double worst = suite.worstRatio(), worstAll = 0;
  MPI_Reduce(&worst, &worstAll, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("nccl_mpi_test --%s%s%s: %d ranks, %lld elements checked (largest float error %.3g of its bound): %s\n",
                modeName(opt), opt.mode == Mode::kBound ? " " : "", opt.mode == Mode::kBound ? opt.codec.c_str() : "",
                nranks, total, worstAll, anyBad ? "FAILED" : "ok");
  return anyBad ? 1 : 0;
}

}  // namespace
}  // namespace nccl_mpi

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = nccl_mpi::run(argc, argv);
  MPI_Finalize();
  return rc;
}
