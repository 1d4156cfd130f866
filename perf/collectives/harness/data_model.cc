// SPDX-License-Identifier: BSD-3-Clause
#include "harness/data_model.h"

#include <algorithm>
#include <cmath>

#include "harness/datatypes.h"

namespace cclperf {
namespace {
constexpr int64_t kMaxValue = 1000;  // keeps inputs small and varied whatever the type
}

DataModel::DataModel(cclDataType_t type, bool reducing, cclRedOp_t op, int nranks, uint64_t seed)
    : type_(type),
      reducing_(reducing),
      op_(op),
      nranks_(nranks),
      seed_(seed),
      limit_(dataTypeInfo(type).exactLimit),
      range_(0),
      ownerOnly_(false),
      prodTwos_(0) {
  const int64_t n = nranks;
  if (!reducing_ || op_ == cclMax || op_ == cclMin) {
    range_ = std::min(limit_, kMaxValue);
  } else if (op_ == cclSum) {
    range_ = std::min(limit_ / n, kMaxValue);
    // Too many ranks for the type's range: a single contributor per element keeps the
    // sum exact and still tells every rank's data apart.
    if (range_ == 0) {
      ownerOnly_ = true;
      range_ = std::min(limit_, kMaxValue);
    }
  } else if (op_ == cclAvg) {
    // Inputs are multiples of n so that both sum-then-divide and divide-then-sum are exact.
    range_ = std::min(limit_ / (n * n), kMaxValue);
    if (range_ == 0) {
      ownerOnly_ = true;
      range_ = std::min(limit_ / n, kMaxValue);
    }
  } else if (op_ == cclProd) {
    int log2Limit = 0;
    while ((int64_t{2} << log2Limit) <= limit_) ++log2Limit;
    prodTwos_ = std::min(nranks, log2Limit);
  }
}

uint64_t DataModel::hash(int rank, size_t index) const {
  uint64_t x =
      seed_ * 0x9e3779b97f4a7c15ull + uint64_t(index) * 0xbf58476d1ce4e5b9ull + uint64_t(rank) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

double DataModel::sumInput(int rank, size_t index) const {
  if (ownerOnly_) return size_t(rank) == index % size_t(nranks_) ? double(1 + hash(rank, index) % range_) : 0.0;
  return double(hash(rank, index) % uint64_t(range_ + 1));
}

double DataModel::avgInput(int rank, size_t index) const {
  if (range_ == 0) return 0.0;
  const double n = nranks_;
  if (ownerOnly_) return size_t(rank) == index % size_t(nranks_) ? n * double(1 + hash(rank, index) % range_) : 0.0;
  return n * double(hash(rank, index) % uint64_t(range_ + 1));
}

double DataModel::prodInput(int rank, size_t index) const {
  // Exactly `twos` ranks (a rotation by index) contribute 2, the others 1.
  const int twos = int(hash(0, index) % uint64_t(prodTwos_ + 1));
  return int((size_t(rank) + index) % size_t(nranks_)) < twos ? 2.0 : 1.0;
}

double DataModel::input(int rank, size_t index) const {
  if (!reducing_) return double(hash(rank, index) % uint64_t(range_ + 1));
  switch (op_) {
    case cclSum:
      return sumInput(rank, index);
    case cclAvg:
      return avgInput(rank, index);
    case cclProd:
      return prodInput(rank, index);
    default:
      return double(hash(rank, index) % uint64_t(range_ + 1));
  }
}

double DataModel::reduced(size_t index) const {
  double acc = input(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const double v = input(r, index);
    switch (op_) {
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
  return op_ == cclAvg ? acc / nranks_ : acc;
}

}  // namespace cclperf
