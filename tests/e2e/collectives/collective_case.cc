// SPDX-License-Identifier: BSD-3-Clause
#include "collective_case.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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
  if (c.coll == kSendRecvAllPairs) return {n * k, n * k, Shape::Alias::kSame};
  switch (c.coll.kind) {
    case CollKind::kAllGather:
    case CollKind::kGather:
      return {k, n * k, Shape::Alias::kSendInsideRecv};
    case CollKind::kReduceScatter:
    case CollKind::kScatter:
      return {n * k, k, Shape::Alias::kRecvInsideSend};
    case CollKind::kAlltoAll:
      return {n * k, n * k, Shape::Alias::kSame};
    default:
      return {k, k, Shape::Alias::kSame};
  }
}

// Everything a rank needs to fill and check its buffers.
class CaseRunner {
 public:
  explicit CaseRunner(const Case& c)
      : c_(c),
        shape_(shapeOf(c)),
        size_(dtypeInfo(c.dtype).size),
        root_(rootRank(c)),
        name_(caseName(c)),
        seed_(std::hash<std::string>{}(name_)),
        reductionInput_(c.dtype, c.op, c.nranks, seed_),
        movementInput_(c.dtype, seed_),
        sentinel_(kSentinelByte * (~uint64_t{0} / 0xff) & sizeMask(size_)) {
    if (isReduction(c.coll)) precomputeReduction();
  }

  void rank(int rank, cclComm_t comm) const;

 private:
  uint64_t input(int rank, size_t j) const {
    return isReduction(c_.coll) ? reductionInput_(rank, j) : movementInput_(rank, j);
  }
  uint64_t sentinel(int, size_t) const { return sentinel_; }
  // Receive buffers are filled with this byte before the call (memset keeps large cases fast).
  static constexpr uint64_t kSentinelByte = 0xa5;

  void precomputeReduction();
  cclResult_t call(int rank, cclComm_t comm, const void* send, void* recv) const;
  void check(int rank, const unsigned char* send, const unsigned char* recv, bool sendIsSeparate) const;
  template <typename Expected>
  void checkRegion(int rank, const char* what, const unsigned char* buf, size_t len, Expected expected,
                   bool reduced) const;

  const Case c_;
  const Shape shape_;
  const size_t size_;
  const int root_;
  const std::string name_;
  const uint64_t seed_;
  const ReductionInput reductionInput_;
  const MovementInput movementInput_;
  const uint64_t sentinel_;        // an element of kSentinelByte
  std::vector<uint64_t> reduced_;  // reference result per element of the reduced vector
};

void CaseRunner::precomputeReduction() {
  const size_t len = c_.coll.kind == CollKind::kReduceScatter ? c_.count * c_.nranks : c_.count;
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
  switch (c_.coll.kind) {
    case CollKind::kAllReduce:
      return cclAllReduce(send, recv, k, t, c_.op, comm, nullptr);
    case CollKind::kBroadcast:
      return c_.coll == kBcast ? cclBcast(recv, k, t, root_, comm, nullptr)
                               : cclBroadcast(send, recv, k, t, root_, comm, nullptr);
    case CollKind::kReduce:
      return cclReduce(send, recv, k, t, c_.op, root_, comm, nullptr);
    case CollKind::kAllGather:
      return cclAllGather(send, recv, k, t, comm, nullptr);
    case CollKind::kReduceScatter:
      return cclReduceScatter(send, recv, k, t, c_.op, comm, nullptr);
    case CollKind::kAlltoAll:
      return cclAlltoAll(send, recv, k, t, comm, nullptr);
    case CollKind::kGather:
      return cclGather(send, recv, k, t, root_, comm, nullptr);
    case CollKind::kScatter:
      return cclScatter(send, recv, k, t, root_, comm, nullptr);
    case CollKind::kSend:
    case CollKind::kRecv:
      break;
  }
  const int n = c_.nranks;
  cclResult_t first = cclGroupStart();
  auto keep = [&first](cclResult_t r) {
    if (first == cclSuccess) first = r;
  };
  if (c_.coll == kSendRecvRing) {
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
  const bool inPlace = c_.inPlace || c_.coll == kBcast;
  const size_t shift = c_.misalign;  // the vectors' data are aligned: the buffers start this far in
  if (!inPlace) {
    sendBuf.resize(shape_.sendElems * size_ + shift);
    recvBuf.resize(shape_.recvElems * size_ + shift);
    send = sendBuf.data() + shift;
    recv = recvBuf.data() + shift;
    if (shape_.recvElems) std::memset(recv, kSentinelByte, shape_.recvElems * size_);
    for (size_t j = 0; j < shape_.sendElems; ++j) storeBits(send, j, size_, input(rank, j));
  } else {
    const size_t elems = std::max(shape_.sendElems, shape_.recvElems);
    recvBuf.resize(elems * size_ + shift);
    if (elems) std::memset(recvBuf.data() + shift, kSentinelByte, elems * size_);
    send = recv = recvBuf.data() + shift;
    if (shape_.alias == Shape::Alias::kSendInsideRecv) send = recv + offset * size_;
    if (shape_.alias == Shape::Alias::kRecvInsideSend) recv = send + offset * size_;
    for (size_t j = 0; j < shape_.sendElems; ++j) storeBits(send, j, size_, input(rank, j));
  }
  const cclResult_t r = call(rank, comm, send, recv);
  EXPECT_EQ(r, cclSuccess) << name_ << " rank " << rank << ": " << describeResult(r);
  if (r != cclSuccess) return;
  check(rank, send, recv, !inPlace);
}

template <typename Expected>
void CaseRunner::checkRegion(int rank, const char* what, const unsigned char* buf, size_t len, Expected expected,
                             bool reduced) const {
  MismatchReport report(name_ + " rank " + std::to_string(rank) + " " + what, c_.dtype);
  for (size_t j = 0; j < len; ++j) {
    const uint64_t got = loadBits(buf, j, size_), want = expected(j);
    if (reduced ? !reductionMatches(c_.dtype, c_.op, got, want) : got != want) report.add(what, j, got, want);
  }
}

void CaseRunner::check(int rank, const unsigned char* send, const unsigned char* recv, bool sendIsSeparate) const {
  const size_t k = c_.count, n = static_cast<size_t>(c_.nranks), offset = static_cast<size_t>(rank) * k;
  const bool isRoot = rank == root_;
  auto own = [&](size_t j) { return input(rank, j); };
  auto block = [&](size_t r) { return recv + r * k * size_; };
  if (c_.coll == kSendRecvRing) {
    const int from = static_cast<int>((rank + n - 1) % n);
    checkRegion(
        rank, "recvbuff", recv, k, [&](size_t j) { return input(from, j); }, false);
  } else if (c_.coll == kSendRecvAllPairs) {
    for (size_t r = 0; r < n; ++r) {
      const bool self = r == static_cast<size_t>(rank);  // no message to itself: untouched
      checkRegion(
          rank, "recvbuff block", block(r), k,
          [&](size_t j) { return self ? sentinel(rank, r * k + j) : input(static_cast<int>(r), offset + j); }, false);
    }
  }
  switch (c_.coll.kind) {
    case CollKind::kAllReduce:
      checkRegion(
          rank, "recvbuff", recv, k, [&](size_t j) { return reduced_[j]; }, true);
      break;
    case CollKind::kBroadcast:
      checkRegion(
          rank, "recvbuff", recv, k, [&](size_t j) { return input(root_, j); }, false);
      break;
    case CollKind::kReduce:
      if (isRoot)
        checkRegion(
            rank, "recvbuff", recv, k, [&](size_t j) { return reduced_[j]; }, true);
      else if (sendIsSeparate)
        checkRegion(
            rank, "non-root recvbuff", recv, k, [&](size_t j) { return sentinel(rank, j); }, false);
      else
        checkRegion(rank, "non-root buffer", recv, k, own, false);
      break;
    case CollKind::kAllGather:
      for (size_t r = 0; r < n; ++r)
        checkRegion(
            rank, "recvbuff block", block(r), k, [&](size_t j) { return input(static_cast<int>(r), j); }, false);
      break;
    case CollKind::kReduceScatter:
      checkRegion(
          rank, "recvbuff", recv, k, [&](size_t j) { return reduced_[offset + j]; }, true);
      break;
    case CollKind::kAlltoAll:
      for (size_t r = 0; r < n; ++r)
        checkRegion(
            rank, "recvbuff block", block(r), k, [&](size_t j) { return input(static_cast<int>(r), offset + j); },
            false);
      break;
    case CollKind::kGather:
      for (size_t r = 0; r < n; ++r) {
        // Only the root's buffer is written; a non-root's holds what it held (in place: its own block).
        const bool written = isRoot || (!sendIsSeparate && r == static_cast<size_t>(rank));
        checkRegion(
            rank, isRoot ? "recvbuff block" : "non-root recvbuff block", block(r), k,
            [&](size_t j) { return written ? input(static_cast<int>(r), j) : sentinel(rank, r * k + j); }, false);
      }
      break;
    case CollKind::kScatter:
      checkRegion(
          rank, "recvbuff", recv, k, [&](size_t j) { return input(root_, offset + j); }, false);
      break;
    case CollKind::kSend:
    case CollKind::kRecv:
      break;
  }
  if (sendIsSeparate) checkRegion(rank, "sendbuff (must stay unchanged)", send, shape_.sendElems, own, false);
}

}  // namespace

const std::vector<Coll>& allColls() {
  static const std::vector<Coll> all = [] {
    std::vector<Coll> v;
    for (int c = 0; c < ccl::coll::kNumColls; ++c)
      if (!ccl::coll::collInfo(static_cast<CollKind>(c)).pointToPoint) v.push_back(static_cast<CollKind>(c));
    v.insert(v.begin() + 2, kBcast);  // beside broadcast
    v.push_back(kSendRecvRing);
    v.push_back(kSendRecvAllPairs);
    return v;
  }();
  return all;
}

std::string collName(Coll c) {
  switch (c.form) {
    case Form::kBcast:
      return "bcast";
    case Form::kSendRecvRing:
      return "sendrecv_ring";
    case Form::kSendRecvAllPairs:
      return "sendrecv_allpairs";
    case Form::kPlain:
      break;
  }
  return ccl::coll::collInfo(c.kind).name;
}

bool isReduction(Coll c) { return ccl::coll::collInfo(c.kind).reduction; }
bool isRooted(Coll c) { return ccl::coll::collInfo(c.kind).rooted; }

size_t sendElems(const Case& c) { return shapeOf(c).sendElems; }
size_t recvElems(const Case& c) { return shapeOf(c).recvElems; }

bool hasInPlace(Coll c) { return ccl::coll::collInfo(c.kind).inPlace != ccl::coll::InPlace::kNone; }
bool hasOutOfPlace(Coll c) { return c != kBcast; }

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
  std::string s = collName(c.coll) + "_" + dtypeInfo(c.dtype).name;
  if (isReduction(c.coll)) s += std::string("_") + opName(c.op);
  s += std::string("_r") + std::to_string(c.nranks) + "_n" + std::to_string(c.count);
  if (isRooted(c.coll)) s += std::string("_root") + std::to_string(rootRank(c));
  if (hasInPlace(c.coll) && hasOutOfPlace(c.coll)) s += c.inPlace ? "_inplace" : "_outofplace";
  if (c.misalign) s += "_at" + std::to_string(c.misalign);
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
