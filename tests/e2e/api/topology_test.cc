// SPDX-License-Identifier: BSD-3-Clause
// The nodes of a communicator (cclCommTopology): made from each rank's host identity
// (config->hostId, CCL_HOST_ID, or the host's own), of equal or unequal sizes, kept through
// cclCommSplit; identities that are not printable text of 1..255 characters are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

struct Place {
  int node = -1, nnodes = -1, localRank = -1, localRanks = -1;
  bool operator==(const Place&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Place& p) {
  return os << "node " << p.node << " of " << p.nnodes << ", local rank " << p.localRank << " of " << p.localRanks;
}

Place placeOf(cclComm_t comm) {
  Place p;
  EXPECT_CCL_OK(cclCommTopology(comm, &p.node, &p.nnodes, &p.localRank, &p.localRanks));
  return p;
}

// What each rank of a communicator whose ranks have identities `ids` should be told: nodes
// numbered in the order of their first rank, local ranks in rank order.
std::vector<Place> expectedPlaces(const std::vector<std::string>& ids) {
  std::vector<std::string> nodes;
  std::vector<int> nodeOf, local;
  std::vector<int> sizes;
  for (const std::string& id : ids) {
    size_t n = 0;
    while (n < nodes.size() && nodes[n] != id) ++n;
    if (n == nodes.size()) {
      nodes.push_back(id);
      sizes.push_back(0);
    }
    nodeOf.push_back(static_cast<int>(n));
    local.push_back(sizes[n]++);
  }
  std::vector<Place> out;
  for (size_t r = 0; r < ids.size(); ++r)
    out.push_back({nodeOf[r], static_cast<int>(nodes.size()), local[r], sizes[static_cast<size_t>(nodeOf[r])]});
  return out;
}

// One communicator per entry of `ids`, rank r made with config->hostId = ids[r] (NULL: left
// undefined), each rank on its own thread; destroyed with the object.
class Comms {
 public:
  explicit Comms(const std::vector<const char*>& ids) : comms_(ids.size(), nullptr) {
    cclUniqueId id{};
    EXPECT_CCL_OK(cclGetUniqueId(&id));
    const int n = size();
    expectNoneThrew(runRanks(n, [&](int r) {
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.hostId = ids[static_cast<size_t>(r)];
      EXPECT_CCL_OK(cclCommInitRankConfig(&comms_[static_cast<size_t>(r)], n, id, r, &config));
    }));
  }
  // Takes over communicators made elsewhere (a split's children; NULL entries allowed).
  struct Adopt {};
  Comms(Adopt, std::vector<cclComm_t> comms) : comms_(std::move(comms)) {}
  ~Comms() {
    for (cclComm_t c : comms_)
      if (c) EXPECT_CCL_OK(cclCommDestroy(c));
  }
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }
  bool ready() const {
    for (cclComm_t c : comms_)
      if (!c) return false;
    return true;
  }
  cclComm_t operator[](int r) const { return comms_[static_cast<size_t>(r)]; }

 private:
  std::vector<cclComm_t> comms_;
};

// Every rank's place, and a count of each communicator's ranks by a sum over it, to show it
// still works (the entries may be several communicators, a split's children).
std::vector<Place> placesAndSum(const Comms& comms) {
  std::vector<Place> got(static_cast<size_t>(comms.size()));
  expectNoneThrew(runRanks(comms.size(), [&](int r) {
    if (!comms[r]) return;
    got[static_cast<size_t>(r)] = placeOf(comms[r]);
    int count = 0;
    EXPECT_CCL_OK(cclCommCount(comms[r], &count));
    int32_t in = 1, out = 0;
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comms[r], nullptr));
    EXPECT_EQ(out, count);
  }));
  return got;
}

struct Layout {
  const char* name;
  std::vector<std::string> ids;
};

class TopologyLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(TopologyLayouts, FromConfigHostIds) {
  const std::vector<std::string>& ids = GetParam().ids;
  std::vector<const char*> given;
  for (const std::string& s : ids) given.push_back(s.c_str());
  Comms comms(given);
  ASSERT_TRUE(comms.ready());
  const std::vector<Place> want = expectedPlaces(ids);
  const std::vector<Place> got = placesAndSum(comms);
  for (int r = 0; r < comms.size(); ++r) EXPECT_EQ(got[r], want[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Topology, TopologyLayouts,
                         ::testing::Values(Layout{"TwoNodesOfTwo", {"a", "a", "b", "b"}},
                                           Layout{"UnequalThreePlusOne", {"a", "b", "a", "a"}},
                                           Layout{"OneNodeOfFour", {"a", "a", "a", "a"}},
                                           Layout{"FourNodesOfOne", {"a", "b", "c", "d"}},
                                           Layout{"InterleavedTwoPlusThreePlusOne", {"x", "y", "y", "x", "y", "z"}},
                                           Layout{"OneRank", {"solo"}}),
                         [](const ::testing::TestParamInfo<Layout>& i) { return std::string(i.param.name); });

TEST(Topology, FromTheHostNameEveryRankIsOneNode) {
  ScopedEnv unset("CCL_HOST_ID", nullptr);
  Comms comms({nullptr, nullptr, nullptr});
  ASSERT_TRUE(comms.ready());
  const std::vector<Place> got = placesAndSum(comms);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r], (Place{0, 1, r, 3})) << "rank " << r;
}

TEST(Topology, HostIdFromTheEnvironmentAndConfigOverridesIt) {
  ScopedEnv env("CCL_HOST_ID", "netns-1");
  {
    Comms comms({nullptr, nullptr, nullptr});
    ASSERT_TRUE(comms.ready());
    const std::vector<Place> got = placesAndSum(comms);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r], (Place{0, 1, r, 3})) << "rank " << r;
    // The identity the ranks hold is CCL_HOST_ID's: a split may repeat it, not change it.
    expectNoneThrew(runRanks(3, [&](int r) {
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.hostId = "netns-1";
      cclComm_t child = nullptr;
      EXPECT_CCL_OK(cclCommSplit(comms[r], 0, r, &child, &config));
      EXPECT_EQ(placeOf(child), (Place{0, 1, r, 3}));
      EXPECT_CCL_OK(cclCommDestroy(child));
    }));
  }
  // A rank's config->hostId wins over CCL_HOST_ID; ranks that leave it undefined take it.
  Comms mixed({"a", nullptr, "a", nullptr});
  ASSERT_TRUE(mixed.ready());
  const std::vector<Place> got = placesAndSum(mixed);
  const std::vector<Place> want = expectedPlaces({"a", "netns-1", "a", "netns-1"});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], want[r]) << "rank " << r;
}

// An intra-node codec (CCL_CODEC_INTRA) is that of compressed calls: with no codec for the
// calls themselves, or below the size floor, or where CCL_COMPRESS leaves a collective out,
// hierarchical allreduce and broadcast stay exact inside the nodes too (they were quantised
// there to 2 bits: a broadcast of 7 floats came out wrong).
TEST(Topology, AnIntraNodeCodecLeavesUncompressedCallsExact) {
  ScopedEnv intra("CCL_CODEC_INTRA", "int2");
  ScopedEnv codec("CCL_CODEC", nullptr);
  Comms comms({"a", "a", "b", "b"});
  ASSERT_TRUE(comms.ready());
  for (size_t count : {size_t{7}, size_t{70000}}) {
    std::vector<std::vector<float>> sums(4), bcast(4);
    expectNoneThrew(runRanks(4, [&](int r) {
      std::vector<float> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r) - 1.5f * static_cast<float>(i % 13);
      std::vector<float>& out = sums[static_cast<size_t>(r)];
      out.assign(count, 0.f);
      EXPECT_CCL_OK(cclAllReduce(in.data(), out.data(), count, cclFloat32, cclSum, comms[r], nullptr));
      std::vector<float>& b = bcast[static_cast<size_t>(r)];
      b = in;
      EXPECT_CCL_OK(cclBroadcast(b.data(), b.data(), count, cclFloat32, 0, comms[r], nullptr));
    }));
    for (int r = 0; r < 4; ++r)
      for (size_t i = 0; i < count; ++i) {
        const float x = -1.5f * static_cast<float>(i % 13);
        ASSERT_EQ(sums[static_cast<size_t>(r)][i], 6.f + 4 * x) << "allreduce, rank " << r << ", element " << i;
        ASSERT_EQ(bcast[static_cast<size_t>(r)][i], x) << "broadcast, rank " << r << ", element " << i;
      }
  }
}

// Splits `parent` with color(r) and key(r) on every rank (config NULL unless given) and
// returns the children, NULL for CCL_SPLIT_NOCOLOR.
template <class Color, class Key>
std::vector<cclComm_t> split(const Comms& parent, Color color, Key key, const cclConfig_t* config = nullptr) {
  std::vector<cclComm_t> children(static_cast<size_t>(parent.size()), nullptr);
  expectNoneThrew(runRanks(parent.size(), [&](int r) {
    std::optional<cclConfig_t> mine;
    if (config) mine = *config;
    EXPECT_CCL_OK(
        cclCommSplit(parent[r], color(r), key(r), &children[static_cast<size_t>(r)], mine ? &*mine : nullptr));
  }));
  return children;
}

TEST(Topology, KeptThroughSplit) {
  Comms parent({"a", "a", "b", "b"});
  ASSERT_TRUE(parent.ready());
  {  // {0, 2} and {1, 3}: each child has one rank of each node
    Comms children(Comms::Adopt{}, split(
                                       parent, [](int r) { return r % 2; }, [](int r) { return r; }));
    ASSERT_TRUE(children.ready());
    const std::vector<Place> got = placesAndSum(children);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], (Place{r / 2, 2, 0, 1})) << "parent rank " << r;
  }
  {  // {0, 1} and {2, 3}: each child is one node
    Comms children(Comms::Adopt{}, split(
                                       parent, [](int r) { return r / 2; }, [](int r) { return r; }));
    ASSERT_TRUE(children.ready());
    const std::vector<Place> got = placesAndSum(children);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], (Place{0, 1, r % 2, 2})) << "parent rank " << r;
  }
  {  // every rank, in reverse order: the child's rank 0 is parent rank 3, so node 0 is "b"
    Comms children(Comms::Adopt{}, split(
                                       parent, [](int) { return 0; }, [](int r) { return -r; }));
    ASSERT_TRUE(children.ready());
    const std::vector<Place> got = placesAndSum(children);
    const std::vector<Place> want = {{1, 2, 1, 2}, {1, 2, 0, 2}, {0, 2, 1, 2}, {0, 2, 0, 2}};
    for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], want[r]) << "parent rank " << r;
  }
  {  // a config of the split's own (hostId undefined, as the NCCL face passes it)
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.commName = "topology-split";
    Comms children(Comms::Adopt{},
                   split(
                       parent, [](int r) { return r == 3 ? CCL_SPLIT_NOCOLOR : 0; }, [](int r) { return r; }, &config));
    for (int r = 0; r < 3; ++r) ASSERT_NE(children[r], nullptr) << "parent rank " << r;
    EXPECT_EQ(children[3], nullptr);
    const std::vector<Place> want = expectedPlaces({"a", "a", "b"});
    expectNoneThrew(runRanks(3, [&](int r) { EXPECT_EQ(placeOf(children[r]), want[r]) << "rank " << r; }));
  }
}

TEST(Topology, UnequalNodesKeptThroughSplit) {
  Comms parent({"a", "a", "a", "b"});
  ASSERT_TRUE(parent.ready());
  EXPECT_EQ(placesAndSum(parent), expectedPlaces({"a", "a", "a", "b"}));
  Comms children(Comms::Adopt{}, split(
                                     parent, [](int r) { return r == 0 || r == 3 ? 0 : 1; }, [](int r) { return r; }));
  ASSERT_TRUE(children.ready());
  const std::vector<Place> got = placesAndSum(children);
  const std::vector<Place> want = {{0, 2, 0, 1}, {0, 1, 0, 2}, {0, 1, 1, 2}, {1, 2, 0, 1}};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], want[r]) << "parent rank " << r;
}

TEST(Topology, SplitRefusesAnotherHostId) {
  Comms parent({"a", "b"});
  ASSERT_TRUE(parent.ready());
  expectNoneThrew(runRanks(2, [&](int r) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.hostId = "c";
    cclComm_t child = reinterpret_cast<cclComm_t>(0x1);
    const cclResult_t res = cclCommSplit(parent[r], 0, r, &child, &config);
    EXPECT_EQ(res, cclInvalidArgument) << describeResult(res);
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("hostId"), std::string::npos) << cclGetLastError(nullptr);
    EXPECT_EQ(child, nullptr) << "a failing split leaves NULL (ccl.h)";
  }));
  // The parent is unharmed.
  EXPECT_EQ(placesAndSum(parent), expectedPlaces({"a", "b"}));
}

// Init of a one-rank communicator with config->hostId = `hostId`; expects cclInvalidArgument
// and a message holding `source` and `why`.
void expectRefused(const char* hostId, const char* source, const char* why) {
  runWithDeadline(
      [&] {
        cclUniqueId id{};
        ASSERT_CCL_OK(cclGetUniqueId(&id));
        cclConfig_t config = CCL_CONFIG_INITIALIZER;
        config.hostId = hostId;
        cclComm_t comm = reinterpret_cast<cclComm_t>(0x1);
        const cclResult_t r = cclCommInitRankConfig(&comm, 1, id, 0, &config);
        EXPECT_EQ(r, cclInvalidArgument) << describeResult(r);
        const std::string message = cclGetLastError(nullptr);
        EXPECT_NE(message.find(source), std::string::npos) << message;
        EXPECT_NE(message.find(why), std::string::npos) << message;
        EXPECT_EQ(comm, nullptr) << "a failing init leaves NULL (ccl.h)";
      },
      "init with a bad host identity");
}

TEST(Topology, BadHostIdsAreRefused) {
  expectRefused("", "config->hostId", "empty");
  expectRefused(std::string(256, 'h').c_str(), "config->hostId", "256 characters");
  expectRefused("node\n1", "config->hostId", "control character");
  expectRefused("tab\there", "config->hostId", "control character");
  expectRefused("del\x7f", "config->hostId", "control character");
  {
    ScopedEnv env("CCL_HOST_ID", "bad\tvalue");
    expectRefused(nullptr, "CCL_HOST_ID", "control character");
    // A config->hostId means CCL_HOST_ID is not read.
    Comms comms({"fine"});
    EXPECT_TRUE(comms.ready());
  }
  // The longest accepted identity, and text beyond ASCII (a UTF-8 host name).
  Comms longest({std::string(255, 'h').c_str(),
                 "n\xc3\xb6"
                 "de"});
  ASSERT_TRUE(longest.ready());
  EXPECT_EQ(placesAndSum(longest), expectedPlaces({"x", "y"}));
}

// A caller built before hostId and intraCompression existed passes a shorter config: the
// library must not read past its size.
TEST(Topology, ConfigWithoutTheNewFieldsIsAccepted) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.size = offsetof(cclConfig_t, hostId);
  config.hostId = reinterpret_cast<const char*>(0x1);  // beyond `size`: never read
  config.intraCompression = reinterpret_cast<const cclCompression_t*>(0x1);
  World w(2, &config);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    EXPECT_EQ(placeOf(comm).nnodes, 1);
    int32_t in = rank + 1, out = 0;
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_EQ(out, 3);
  });
}

TEST(Topology, QueryArguments) {
  int node = 7, nnodes = 7, localRank = 7, localRanks = 7;
  const cclResult_t r = cclCommTopology(nullptr, &node, &nnodes, &localRank, &localRanks);
  EXPECT_EQ(r, cclInvalidArgument) << describeResult(r);
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find("comm"), std::string::npos) << cclGetLastError(nullptr);
  EXPECT_EQ((Place{node, nnodes, localRank, localRanks}), (Place{7, 7, 7, 7}))
      << "an output parameter was written by a failing call";
  Comms comms({"a", "b"});
  ASSERT_TRUE(comms.ready());
  // Any output may be NULL; the others are still written.
  EXPECT_CCL_OK(cclCommTopology(comms[1], nullptr, nullptr, nullptr, nullptr));
  EXPECT_CCL_OK(cclCommTopology(comms[1], &node, nullptr, nullptr, nullptr));
  EXPECT_EQ(node, 1);
  EXPECT_CCL_OK(cclCommTopology(comms[1], nullptr, &nnodes, nullptr, nullptr));
  EXPECT_EQ(nnodes, 2);
  EXPECT_CCL_OK(cclCommTopology(comms[1], nullptr, nullptr, &localRank, &localRanks));
  EXPECT_EQ(localRank, 0);
  EXPECT_EQ(localRanks, 1);
  // Still readable after cclCommFinalize.
  expectNoneThrew(runRanks(2, [&](int r) { EXPECT_CCL_OK(cclCommFinalize(comms[r])); }));
  EXPECT_EQ(placeOf(comms[0]), (Place{0, 2, 0, 1}));
}

}  // namespace
}  // namespace ccltest

namespace ccltest {
namespace {

// The collectives a topology changes, through the api on nodes of unequal sizes: allreduce
// (hierarchical, exact uncompressed; int8 with feedback across nodes, the same bits on every
// rank), broadcast, reduce, allgather, reduce-scatter and all-to-all (exact).
TEST(Topology, HierarchicalCallsOnUnequalNodes) {
  const std::vector<const char*> ids{"a", "a", "b", "b", "b"};
  Comms comms(ids);
  ASSERT_TRUE(comms.ready());
  const int n = comms.size();
  const size_t count = 10007;
  std::vector<std::vector<float>> lossy(n);
  expectNoneThrew(runRanks(n, [&](int r) {
    cclComm_t c = comms[r];
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>((i * 7 + r * 13) % 23) - 11;
    EXPECT_CCL_OK(cclAllReduce(in.data(), out.data(), count, cclInt32, cclSum, c, nullptr));
    for (size_t i = 0; i < count; i += 97) {
      int32_t want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<int32_t>((i * 7 + q * 13) % 23) - 11;
      ASSERT_EQ(out[i], want) << "allreduce, rank " << r << " element " << i;
    }
    std::vector<int32_t> b(count, r == 3 ? 5 : 0);
    EXPECT_CCL_OK(cclBroadcast(b.data(), b.data(), count, cclInt32, 3, c, nullptr));
    EXPECT_EQ(b[count - 1], 5) << "broadcast, rank " << r;
    EXPECT_CCL_OK(cclReduce(in.data(), out.data(), count, cclInt32, cclSum, 1, c, nullptr));
    if (r == 1)
      for (size_t i = 0; i < count; i += 97) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) want += static_cast<int32_t>((i * 7 + q * 13) % 23) - 11;
        ASSERT_EQ(out[i], want) << "reduce, element " << i;
      }
    std::vector<int32_t> all(count * n), mine(count);
    EXPECT_CCL_OK(cclAllGather(in.data(), all.data(), count, cclInt32, c, nullptr));
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(all[q * count + 5], static_cast<int32_t>((5 * 7 + q * 13) % 23) - 11) << "allgather, rank " << r;
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i % 1000) + r;
    EXPECT_CCL_OK(cclReduceScatter(all.data(), mine.data(), count, cclInt32, cclSum, c, nullptr));
    for (size_t i = 0; i < count; i += 101)
      ASSERT_EQ(mine[i], n * static_cast<int32_t>((r * count + i) % 1000) + n * (n - 1) / 2)
          << "reduce-scatter, rank " << r << " element " << i;
    std::vector<int32_t> swapped(count * n);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(r * 100000 + i);
    EXPECT_CCL_OK(cclAlltoAll(all.data(), swapped.data(), count, cclInt32, c, nullptr));
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(swapped[q * count + 3], static_cast<int32_t>(q * 100000 + r * count + 3)) << "all-to-all, rank " << r;
    std::vector<float> x(count), y(count);
    for (size_t i = 0; i < count; ++i) x[i] = std::sin(0.01f * static_cast<float>(i) + static_cast<float>(r));
    cclCompression_t int8 = CCL_COMPRESSION_INITIALIZER;
    int8.codec = cclCodecInt8;
    cclFeedback_t fb = nullptr;
    EXPECT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
    EXPECT_CCL_OK(cclAllReduceEx(x.data(), y.data(), count, cclFloat32, cclSum, c, nullptr, &int8, fb));
    EXPECT_CCL_OK(cclFeedbackDestroy(fb));
    lossy[static_cast<size_t>(r)] = y;
  }));
  for (int r = 1; r < n; ++r) EXPECT_EQ(lossy[static_cast<size_t>(r)], lossy[0]) << "rank " << r;
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int q = 0; q < n; ++q) want += std::sin(0.01f * static_cast<float>(i) + static_cast<float>(q));
    worst = std::max(worst, std::fabs(lossy[0][i] - want));
  }
  EXPECT_LT(worst, 0.1) << "int8 across nodes: the sum of 5 values in [-1, 1]";
}

}  // namespace
}  // namespace ccltest
