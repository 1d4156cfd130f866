// SPDX-License-Identifier: BSD-3-Clause
// Reductions of random Gaussian data, where the summation order changes the result. Each
// element is checked against the exact sum with the classical bound of recursive summation:
// n-1 additions, each rounded to the data type (16-bit types are added in fp32 and rounded
// once per step), err <= (n-1) * u * sum|x| with u the unit roundoff of the type. The check
// allows n * u * sum|x| (one more rounding for the average) plus n half-subnormals.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "collective_case.h"
#include "dtype_ref.h"
#include "reference.h"
#include "world.h"

namespace ccltest {
namespace {

struct GaussCase {
  CollKind coll;  // allreduce, reduce-scatter or reduce
  cclDataType_t dtype;
  cclRedOp_t op;
  int nranks;
  size_t count;
};

std::string gaussName(const ::testing::TestParamInfo<GaussCase>& info) {
  const GaussCase& c = info.param;
  return std::string(ccl::coll::collInfo(c.coll).name) + "_" + dtypeInfo(c.dtype).name + "_" + opName(c.op) + "_r" +
         std::to_string(c.nranks) + "_n" + std::to_string(c.count);
}

// A standard normal sample (Box-Muller) times 10, rounded to the type.
uint64_t gaussianInput(cclDataType_t t, int rank, size_t j) {
  const double u1 = (static_cast<double>(mixBits(7, rank, j) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(mixBits(8, rank, j) >> 11) * 0x1.0p-53;
  return encodeFloat(t, 10.0 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

class GaussianTest : public ::testing::TestWithParam<GaussCase> {};

TEST_P(GaussianTest, WithinSummationBound) {
  const GaussCase c = GetParam();
  const DtypeInfo& d = dtypeInfo(c.dtype);
  const double u = std::ldexp(1.0, -(d.manBits + 1));
  const double halfSubnormal = std::ldexp(1.0, -((1 << (d.expBits - 1)) - 2 + d.manBits) - 1);
  const size_t total = c.coll == CollKind::kReduceScatter ? c.count * c.nranks : c.count;
  std::vector<double> exact(total), bound(total);
  for (size_t j = 0; j < total; ++j) {
    double sum = 0, abs = 0;
    for (int r = 0; r < c.nranks; ++r) {
      const double x = decodeFloat(c.dtype, gaussianInput(c.dtype, r, j));
      sum += x;
      abs += std::fabs(x);
    }
    const double scale = c.op == cclAvg ? 1.0 / c.nranks : 1.0;
    exact[j] = sum * scale;
    bound[j] = (c.nranks * u * abs + c.nranks * halfSubnormal) * scale;
  }
  const int root = c.nranks - 1;
  World& w = World::get(c.nranks);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<unsigned char> send(total * d.size), recv(c.count * d.size);
    for (size_t j = 0; j < total; ++j) storeBits(send.data(), j, d.size, gaussianInput(c.dtype, rank, j));
    cclResult_t r = cclSuccess;
    switch (c.coll) {
      case CollKind::kAllReduce:
        r = cclAllReduce(send.data(), recv.data(), c.count, c.dtype, c.op, comm, nullptr);
        break;
      case CollKind::kReduceScatter:
        r = cclReduceScatter(send.data(), recv.data(), c.count, c.dtype, c.op, comm, nullptr);
        break;
      case CollKind::kReduce:
        r = cclReduce(send.data(), recv.data(), c.count, c.dtype, c.op, root, comm, nullptr);
        break;
      default:
        FAIL() << "the Gaussian cases are reductions";
    }
    ASSERT_EQ(r, cclSuccess) << "rank " << rank << ": " << describeResult(r);
    if (c.coll == CollKind::kReduce && rank != root) return;
    const size_t base = c.coll == CollKind::kReduceScatter ? rank * c.count : 0;
    size_t bad = 0;
    std::string first;
    for (size_t j = 0; j < c.count; ++j) {
      const double got = decodeFloat(c.dtype, loadBits(recv.data(), j, d.size));
      const double err = std::fabs(got - exact[base + j]);
      if (!(err <= bound[base + j])) {
        if (bad++ == 0)
          first = std::string("element ") + std::to_string(base + j) + ": got " + std::to_string(got) + " exact " +
                  std::to_string(exact[base + j]) + " bound " + std::to_string(bound[base + j]);
      }
    }
    EXPECT_EQ(bad, 0u) << "rank " << rank << ": " << bad << " element(s) beyond the bound; first " << first;
  });
}

std::vector<GaussCase> gaussCases() {
  std::vector<GaussCase> cases;
  for (CollKind coll : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kReduce})
    for (cclDataType_t t : {cclFloat32, cclFloat64, cclFloat16, cclBfloat16})
      for (cclRedOp_t op : {cclSum, cclAvg})
        for (int n : {2, 5, 8}) cases.push_back({coll, t, op, n, 4099});
  cases.push_back({CollKind::kAllReduce, cclFloat32, cclSum, 7, 100003});
  cases.push_back({CollKind::kAllReduce, cclBfloat16, cclSum, 8, 100003});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gaussian, GaussianTest, ::testing::ValuesIn(gaussCases()), gaussName);

}  // namespace
}  // namespace ccltest
