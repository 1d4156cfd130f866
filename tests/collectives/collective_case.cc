#include "collective_case.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "dtype_ref.h"
#include "reference.h"
#include "world.h"

namespace ccltest {

namespace {

using Bytes = std::vector<unsigned char>;

// Element counts of the two buffers of one rank, and how they overlap in place.
struct Shape {
  size_t sendElems;
  size_t recvElems;
  enum class Alias { kSame, kSendInsideRecv, kRecvInsideSend } alias;
};

Shape shapeOf(const Case& c) {
  const size_t n = static_cast<size_t>(c.nranks), k = c.count;
  switch (c.coll) {
    case Coll::kAllGather:
    case Coll::kGather:
      return {k, n * k, Shape::Alias::kSendInsideRecv};
    case Coll::kReduceScatter:
    case Coll::kScatter:
      return {n * k, k, Shape::Alias::kRecvInsideSend};
    case Coll::kAlltoAll:
    case Coll::kSendRecvAllPairs:
      return {n * k, n * k, Shape::Alias::kSame};
    default:
      return {k, k, Shape::Alias::kSame};
  }
}

// Everything a rank needs to fill and check its buffers.
class CaseRunner {
 public:
  explicit CaseRunner(const Case& c)
      : c_(c), shape_(shapeOf(c)), size_(dtypeInfo(c.dtype).size), root_(rootRank(c)), name_(caseName(c)) {
    seed_ = std::hash<std::string>{}(name_);
    if (isReduction(c.coll)) precomputeReduction();
  }

  void rank(int rank, cclComm_t comm) const;

 private:
  uint64_t input(int rank, size_t j) const {
    return isReduction(c_.coll) ? reductionInput(c_.dtype, c_.op, c_.nranks, rank, j, seed_)
                                : movementInput(c_.dtype, rank, j, seed_);
  }
  uint64_t sentinel(int rank, size_t j) const { return movementInput(c_.dtype, rank + 1000, j, seed_ ^ 0xdeadbeef); }

  void precomputeReduction();
  cclResult_t call(int rank, cclComm_t comm, const void* send, void* recv) const;
  void check(int rank, const unsigned char* send, const unsigned char* recv, bool sendIsSeparate) const;
  void checkRegion(int rank, const char* what, const unsigned char* buf, size_t begin, size_t end,
                   const std::function<uint64_t(size_t)>& expected, bool reduced) const;

  const Case c_;
  const Shape shape_;
  const size_t size_;
  const int root_;
  const std::string name_;
  uint64_t seed_;
  std::vector<uint64_t> reduced_;  // reference result per element of the reduced vector
};

void CaseRunner::precomputeReduction() {
  const size_t len = c_.coll == Coll::kReduceScatter ? c_.count * c_.nranks : c_.count;
  reduced_.resize(len);
  std::vector<uint64_t> in(c_.nranks);
  for (size_t j = 0; j < len; ++j) {
    for (int r = 0; r < c_.nranks; ++r) in[r] = input(r, j);
    reduced_[j] = reduceReference(c_.dtype, c_.op, in.data(), c_.nranks);
  }
}

cclResult_t CaseRunner::call(int rank, cclComm_t comm, const void* send, void* recv) const {
  const size_t k = c_.count;
  const cclDataType_t t = c_.dtype;
  switch (c_.coll) {
    case Coll::kAllReduce:
      return cclAllReduce(send, recv, k, t, c_.op, comm, nullptr);
    case Coll::kBroadcast:
      return cclBroadcast(send, recv, k, t, root_, comm, nullptr);
    case Coll::kBcast:
      return cclBcast(recv, k, t, root_, comm, nullptr);
    case Coll::kReduce:
      return cclReduce(send, recv, k, t, c_.op, root_, comm, nullptr);
    case Coll::kAllGather:
      return cclAllGather(send, recv, k, t, comm, nullptr);
    case Coll::kReduceScatter:
      return cclReduceScatter(send, recv, k, t, c_.op, comm, nullptr);
    case Coll::kAlltoAll:
      return cclAlltoAll(send, recv, k, t, comm, nullptr);
    case Coll::kGather:
      return cclGather(send, recv, k, t, root_, comm, nullptr);
    case Coll::kScatter:
      return cclScatter(send, recv, k, t, root_, comm, nullptr);
    case Coll::kSendRecvRing:
    case Coll::kSendRecvAllPairs:
      break;
  }
  const int n = c_.nranks;
  cclResult_t first = cclGroupStart();
  auto keep = [&first](cclResult_t r) {
    if (first == cclSuccess) first = r;
  };
  if (c_.coll == Coll::kSendRecvRing) {
    keep(cclSend(send, k, t, (rank + 1) % n, comm, nullptr));
    keep(cclRecv(recv, k, t, (rank + n - 1) % n, comm, nullptr));
  } else {
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      keep(cclSend(static_cast<const unsigned char*>(send) + p * k * size_, k, t, p, comm, nullptr));
      keep(cclRecv(static_cast<unsigned char*>(recv) + p * k * size_, k, t, p, comm, nullptr));
    }
  }
  keep(cclGroupEnd());
  return first;
}

void CaseRunner::rank(int rank, cclComm_t comm) const {
  const size_t k = c_.count;
  const size_t offset = static_cast<size_t>(rank) * k;
  Bytes sendBuf, recvBuf;
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  const bool inPlace = c_.inPlace || c_.coll == Coll::kBcast;
  if (!inPlace) {
    sendBuf.resize(shape_.sendElems * size_);
    recvBuf.resize(shape_.recvElems * size_);
    send = sendBuf.data();
    recv = recvBuf.data();
    for (size_t j = 0; j < shape_.recvElems; ++j) storeBits(recv, j, size_, sentinel(rank, j));
    for (size_t j = 0; j < shape_.sendElems; ++j) storeBits(send, j, size_, input(rank, j));
  } else {
    const size_t elems = std::max(shape_.sendElems, shape_.recvElems);
    recvBuf.resize(elems * size_);
    for (size_t j = 0; j < elems; ++j) storeBits(recvBuf.data(), j, size_, sentinel(rank, j));
    send = recv = recvBuf.data();
    if (shape_.alias == Shape::Alias::kSendInsideRecv) send = recv + offset * size_;
    if (shape_.alias == Shape::Alias::kRecvInsideSend) recv = send + offset * size_;
    for (size_t j = 0; j < shape_.sendElems; ++j) storeBits(send, j, size_, input(rank, j));
  }
  const cclResult_t r = call(rank, comm, send, recv);
  EXPECT_EQ(r, cclSuccess) << name_ << " rank " << rank << ": " << describeResult(r);
  if (r != cclSuccess) return;
  check(rank, send, recv, !inPlace);
}

void CaseRunner::checkRegion(int rank, const char* what, const unsigned char* buf, size_t begin, size_t end,
                             const std::function<uint64_t(size_t)>& expected, bool reduced) const {
  MismatchReport report(name_ + " rank " + std::to_string(rank) + " " + what, c_.dtype);
  for (size_t j = begin; j < end; ++j) {
    const uint64_t got = loadBits(buf, j, size_), want = expected(j);
    if (reduced ? !reductionMatches(c_.dtype, c_.op, got, want) : got != want) report.add(what, j, got, want);
  }
}

void CaseRunner::check(int rank, const unsigned char* send, const unsigned char* recv, bool sendIsSeparate) const {
  const size_t k = c_.count, n = static_cast<size_t>(c_.nranks), offset = static_cast<size_t>(rank) * k;
  const bool isRoot = rank == root_;
  auto in = [&](int r) { return [this, r](size_t j) { return input(r, j); }; };
  auto unchanged = [&](size_t j) { return sentinel(rank, j); };
  auto reducedAt = [&](size_t base) { return [this, base](size_t j) { return reduced_[base + j]; }; };
  const std::function<uint64_t(size_t)> own = in(rank);
  switch (c_.coll) {
    case Coll::kAllReduce:
      checkRegion(rank, "recvbuff", recv, 0, k, reducedAt(0), true);
      break;
    case Coll::kBroadcast:
    case Coll::kBcast:
      checkRegion(rank, "recvbuff", recv, 0, k, in(root_), false);
      break;
    case Coll::kReduce:
      if (isRoot)
        checkRegion(rank, "recvbuff", recv, 0, k, reducedAt(0), true);
      else
        checkRegion(rank, "non-root recvbuff", recv, 0, k, sendIsSeparate ? unchanged : own, false);
      break;
    case Coll::kAllGather:
      for (size_t r = 0; r < n; ++r)
        checkRegion(
            rank, "recvbuff block", recv + r * k * size_, 0, k,
            [&, r](size_t j) { return input(static_cast<int>(r), j); }, false);
      break;
    case Coll::kReduceScatter:
      checkRegion(rank, "recvbuff", recv, 0, k, reducedAt(offset), true);
      break;
    case Coll::kAlltoAll:
      for (size_t r = 0; r < n; ++r)
        checkRegion(
            rank, "recvbuff block", recv + r * k * size_, 0, k,
            [&, r](size_t j) { return input(static_cast<int>(r), offset + j); }, false);
      break;
    case Coll::kGather:
      for (size_t r = 0; r < n; ++r) {
        std::function<uint64_t(size_t)> want = [&, r](size_t j) { return input(static_cast<int>(r), j); };
        if (!isRoot && (sendIsSeparate || r != static_cast<size_t>(rank)))
          want = [&, r](size_t j) { return sentinel(rank, r * k + j); };
        checkRegion(rank, isRoot ? "recvbuff block" : "non-root recvbuff block", recv + r * k * size_, 0, k, want,
                    false);
      }
      break;
    case Coll::kScatter:
      checkRegion(
          rank, "recvbuff", recv, 0, k, [&](size_t j) { return input(root_, offset + j); }, false);
      break;
    case Coll::kSendRecvRing:
      checkRegion(rank, "recvbuff", recv, 0, k, in(static_cast<int>((rank + n - 1) % n)), false);
      break;
    case Coll::kSendRecvAllPairs:
      for (size_t r = 0; r < n; ++r) {
        std::function<uint64_t(size_t)> want = [&, r](size_t j) { return input(static_cast<int>(r), offset + j); };
        if (r == static_cast<size_t>(rank)) want = [&, r](size_t j) { return sentinel(rank, r * k + j); };
        checkRegion(rank, "recvbuff block", recv + r * k * size_, 0, k, want, false);
      }
      break;
  }
  if (sendIsSeparate) checkRegion(rank, "sendbuff (must stay unchanged)", send, 0, shape_.sendElems, own, false);
}

}  // namespace

const std::vector<Coll>& allColls() {
  static const std::vector<Coll> all = {Coll::kAllReduce, Coll::kBroadcast,     Coll::kBcast,           Coll::kReduce,
                                        Coll::kAllGather, Coll::kReduceScatter, Coll::kAlltoAll,        Coll::kGather,
                                        Coll::kScatter,   Coll::kSendRecvRing,  Coll::kSendRecvAllPairs};
  return all;
}

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return "AllReduce";
    case Coll::kBroadcast:
      return "Broadcast";
    case Coll::kBcast:
      return "Bcast";
    case Coll::kReduce:
      return "Reduce";
    case Coll::kAllGather:
      return "AllGather";
    case Coll::kReduceScatter:
      return "ReduceScatter";
    case Coll::kAlltoAll:
      return "AlltoAll";
    case Coll::kGather:
      return "Gather";
    case Coll::kScatter:
      return "Scatter";
    case Coll::kSendRecvRing:
      return "SendRecvRing";
    case Coll::kSendRecvAllPairs:
      return "SendRecvAllPairs";
  }
  return "?";
}

bool isReduction(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

bool isRooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kBcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

bool hasInPlace(Coll c) { return c != Coll::kSendRecvRing && c != Coll::kSendRecvAllPairs; }
bool hasOutOfPlace(Coll c) { return c != Coll::kBcast; }

int rootRank(const Case& c) {
  if (!isRooted(c.coll)) return 0;
  switch (c.root) {
    case RootSel::kFirst:
      return 0;
    case RootSel::kMiddle:
      return c.nranks / 2;
    case RootSel::kLast:
      return c.nranks - 1;
  }
  return 0;
}

std::string caseName(const Case& c) {
  std::string s = std::string(collName(c.coll)) + "_" + dtypeInfo(c.dtype).name;
  if (isReduction(c.coll)) s += std::string("_") + opName(c.op);
  s += "_r" + std::to_string(c.nranks) + "_n" + std::to_string(c.count);
  if (isRooted(c.coll)) s += "_root" + std::to_string(rootRank(c));
  if (hasInPlace(c.coll) && hasOutOfPlace(c.coll)) s += c.inPlace ? "_inplace" : "_outofplace";
  return s;
}

void PrintTo(const Case& c, std::ostream* os) { *os << caseName(c); }

void runCase(const Case& c) {
  const CaseRunner runner(c);
  World& world = World::get(c.nranks);
  ASSERT_TRUE(world.ready()) << "no communicators for " << c.nranks << " ranks";
  world.run([&runner](int rank, cclComm_t comm) { runner.rank(rank, comm); });
}

}  // namespace ccltest
