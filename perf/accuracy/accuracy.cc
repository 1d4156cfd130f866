// SPDX-License-Identifier: BSD-3-Clause
// The numerical contract of every codec, measured: each codec x collective x algorithm x
// rank count x kind of data runs once on ranks as threads (the in-process transport), and
// its result is compared with an fp64 reference of the same collective: the largest and the
// rms error, next to the documented bound (cclCodecErrorBound composed over the collective's
// round trips, collective_info.h's codecRoundTrips) and whether every non-finite value of the
// reference arrived non-finite. One CSV line per case on stdout; the exit status is 1 if any
// case exceeds its bound or loses a non-finite value (perf/accuracy/README.md, run.sh).
//
// Usage: accuracy [--ranks 2,3,4,8,16] [--data gaussian,heavy,outliers,nonfinite]
//                 [--count N] [--codecs all|a,b] [--grads FILE [--grads-parts K]]
// --grads: fp32 values (raw, little-endian) of recorded gradients, one more kind of data
// ("grads"); --grads-parts K: the file is K ranks' buffers one after the other, and rank r
// of a case takes part r mod K, at the same offset on every rank (the same parameters'
// gradients from different data, as a data-parallel allreduce sums them).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "collectives/plan/collective_info.h"

namespace {

using ccl::coll::Coll;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "accuracy: %s\n", why.c_str());
  std::exit(2);
}

void check(cclResult_t r, const char* what) {
  if (r != cclSuccess) die(std::string(what) + ": " + cclGetErrorString(r) + ": " + cclGetLastError(nullptr));
}

struct Options {
  std::vector<int> ranks{2, 3, 4, 8, 16};
  std::vector<std::string> data{"gaussian", "heavy", "outliers", "nonfinite"};
  std::vector<cclCodec_t> codecs;
  size_t count = 4096;  // elements per rank's block
  std::vector<float> grads;
  int gradParts = 1;
};

// Rank r's n values of one kind, the same on every run.
std::vector<float> makeData(const Options& o, const std::string& kind, int r, size_t n, uint32_t salt) {
  std::mt19937 rng(1000003u * static_cast<uint32_t>(r) + salt);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  if (kind == "grads") {
    const size_t part = o.grads.size() / o.gradParts;
    if (part < n) die("--grads: each of its parts needs at least " + std::to_string(n) + " values");
    const size_t off = (size_t(salt) * 7919) % (part - n + 1);  // a different region per codec
    for (size_t i = 0; i < n; ++i) x[i] = o.grads[size_t(r % o.gradParts) * part + off + i];
    return x;
  }
  for (float& v : x) v = normal(rng);
  if (kind == "heavy") {  // Student's t with 2 degrees of freedom: tails of power 2
    std::chi_squared_distribution<float> chi(2.0f);
    for (float& v : x) v = v / std::sqrt(chi(rng) / 2.0f + 1e-12f);
  } else if (kind == "outliers") {  // one element of 256 a thousand times larger
    for (size_t i = rng() % 256; i < n; i += 256) x[i] *= 1000.0f;
  } else if (kind == "nonfinite") {
    x[(17 * size_t(r + 1)) % n] = NAN;
    x[(1000 + size_t(r)) % n] = INFINITY;
    x[(2000 + 3 * size_t(r)) % n] = -INFINITY;
  } else if (kind != "gaussian") {
    die("unknown data '" + kind + "'");
  }
  return x;
}

// One collective of the contract: what each rank sends, and what it must get.
struct Shape {
  const char* name;
  Coll coll;
};
constexpr Shape kShapes[] = {{"allreduce", Coll::kAllReduce}, {"reducescatter", Coll::kReduceScatter},
                             {"allgather", Coll::kAllGather}, {"broadcast", Coll::kBroadcast},
                             {"alltoall", Coll::kAlltoAll},   {"sendrecv", Coll::kSend}};

// Runs one case on every rank's communicator; out[r] gets rank r's result. false if the
// library refuses the codec for this collective (powersgd outside allreduce and send/recv).
bool runCase(Coll c, const std::vector<cclComm_t>& comms, const cclCompression_t& z,
             const std::vector<std::vector<float>>& in, std::vector<std::vector<float>>& out, size_t count) {
  const int n = static_cast<int>(comms.size());
  std::vector<cclResult_t> result(size_t(n), cclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cclComm_t comm = comms[size_t(r)];
      const float* x = in[size_t(r)].data();
      float* y = out[size_t(r)].data();
      cclResult_t& res = result[size_t(r)];
      switch (c) {
        case Coll::kAllReduce:
          res = cclAllReduceEx(x, y, count, cclFloat32, cclSum, comm, nullptr, &z, nullptr);
          break;
        case Coll::kReduceScatter:
          res = cclReduceScatterEx(x, y, count / size_t(n), cclFloat32, cclSum, comm, nullptr, &z, nullptr);
          break;
        case Coll::kAllGather:
          res = cclAllGatherEx(x, y, count, cclFloat32, comm, nullptr, &z, nullptr);
          break;
        case Coll::kBroadcast:
          res = cclBroadcastEx(x, y, count, cclFloat32, 0, comm, nullptr, &z);
          break;
        case Coll::kAlltoAll:
          res = cclAlltoAllEx(x, y, count / size_t(n), cclFloat32, comm, nullptr, &z);
          break;
        default:  // a ring of sends: r to r + 1
          cclGroupStart();
          cclSendEx(x, count, cclFloat32, (r + 1) % n, comm, nullptr, &z, nullptr);
          cclRecvEx(y, count, cclFloat32, (r + n - 1) % n, comm, nullptr, &z);
          res = cclGroupEnd();
          break;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (cclResult_t r : result) {
    if (r == cclInvalidArgument) return false;
    check(r, "collective");
  }
  return true;
}

// The fp64 reference of rank r's result, and per element the sum of |inputs| it depends on.
void reference(Coll c, const std::vector<std::vector<float>>& in, int r, size_t count, std::vector<double>& ref,
               std::vector<double>& absIn) {
  const int n = static_cast<int>(in.size());
  auto src = [&](int rank, size_t i) { return double(in[size_t(rank)][i]); };
  ref.clear();
  absIn.clear();
  auto push = [&](double v, double a) { ref.push_back(v), absIn.push_back(a); };
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kReduceScatter: {
      const size_t block = c == Coll::kAllReduce ? count : count / size_t(n);
      const size_t off = c == Coll::kAllReduce ? 0 : size_t(r) * block;
      for (size_t i = off; i < off + block; ++i) {
        double s = 0, a = 0;
        for (int k = 0; k < n; ++k) s += src(k, i), a += std::fabs(src(k, i));
        push(s, a);
      }
      break;
    }
    case Coll::kAllGather:
      for (int k = 0; k < n; ++k)
        for (size_t i = 0; i < count; ++i) push(src(k, i), std::fabs(src(k, i)));
      break;
    case Coll::kBroadcast:
      for (size_t i = 0; i < count; ++i) push(src(0, i), std::fabs(src(0, i)));
      break;
    case Coll::kAlltoAll: {
      const size_t block = count / size_t(n);
      for (int k = 0; k < n; ++k)
        for (size_t i = 0; i < block; ++i)
          push(src(k, size_t(r) * block + i), std::fabs(src(k, size_t(r) * block + i)));
      break;
    }
    default:
      for (size_t i = 0; i < count; ++i) push(src((r + n - 1) % n, i), std::fabs(src((r + n - 1) % n, i)));
      break;
  }
}

struct Tally {
  double maxErr = 0, sumSq = 0, maxRatio = 0, maxBound = 0;
  size_t values = 0, lostNonFinite = 0, marked = 0;
  bool bounded = true;
};

void compare(const cclCompression_t& z, int roundTrips, const std::vector<double>& ref,
             const std::vector<double>& absIn, const std::vector<float>& got, double absMax, Tally& t) {
  const bool bounded = [&] {
    double b = 0;
    return cclCodecErrorBound(&z, 0, 1, 1, &b) == cclSuccess && std::isfinite(b);
  }();
  t.bounded = bounded;
  double atMax = 0;
  if (bounded) check(cclCodecErrorBound(&z, absMax, absMax, roundTrips, &atMax), "cclCodecErrorBound");
  // The algorithm's own fp32 sums, around the codec's terms.
  const double slack = double(roundTrips + 2) * std::ldexp(1.0, -22) * (absMax + atMax);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double y = got[i];
    if (!std::isfinite(ref[i])) {
      t.lostNonFinite += std::isfinite(y) ? 1 : 0;
      continue;
    }
    if (!std::isfinite(y)) {  // a block marked non-finite as a whole (fixed-length streams)
      ++t.marked;
      continue;
    }
    const double e = std::fabs(y - ref[i]);
    t.maxErr = std::max(t.maxErr, e);
    t.sumSq += e * e;
    ++t.values;
    if (!bounded) continue;
    double b = 0;
    check(cclCodecErrorBound(&z, std::min(absIn[i], absMax), absMax, roundTrips, &b), "cclCodecErrorBound");
    b += slack;
    t.maxBound = std::max(t.maxBound, b);
    t.maxRatio = std::max(t.maxRatio, b > 0 ? e / b : (e > 0 ? HUGE_VAL : 0.0));
  }
}

std::vector<cclComm_t> makeComms(int n, bool twoNodes) {
  cclUniqueId id;
  check(cclGetUniqueId(&id), "cclGetUniqueId");
  std::vector<cclComm_t> comms(size_t(n), nullptr);
  std::vector<cclResult_t> result(size_t(n), cclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      const std::string host = "node" + std::to_string(twoNodes ? r / (n / 2) : 0);
      config.hostId = host.c_str();
      result[size_t(r)] = cclCommInitRankConfig(&comms[size_t(r)], n, id, r, &config);
    });
  }
  for (auto& t : threads) t.join();
  for (cclResult_t r : result) check(r, "cclCommInitRankConfig");
  return comms;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int c = 1; c < cclCodecCount(); ++c) o.codecs.push_back(static_cast<cclCodec_t>(c));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) die("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--ranks") {
      o.ranks.clear();
      for (const std::string& s : split(v)) o.ranks.push_back(std::max(1, std::atoi(s.c_str())));
    } else if (a == "--data") {
      o.data = split(v);
    } else if (a == "--count") {
      o.count = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--codecs") {
      if (v != "all") {
        o.codecs.clear();
        for (const std::string& s : split(v)) {
          cclCodec_t c;
          if (cclCodecFromName(s.c_str(), &c) != cclSuccess) die("unknown codec " + s);
          o.codecs.push_back(c);
        }
      }
    } else if (a == "--grads-parts") {
      o.gradParts = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--grads") {
      std::ifstream f(v, std::ios::binary);
      if (!f) die("cannot read " + v);
      f.seekg(0, std::ios::end);
      o.grads.resize(size_t(f.tellg()) / 4);
      f.seekg(0);
      f.read(reinterpret_cast<char*>(o.grads.data()), std::streamsize(o.grads.size() * 4));
      o.data.push_back("grads");
    } else {
      die("unknown option " + a);
    }
  }
  // Ranks as threads of this process; every call compressed whatever its size.
  setenv("CCL_TRANSPORT", "local", 1);
  setenv("CCL_CODEC_MIN_BYTES", "0", 1);
  std::printf(
      "codec,collective,algorithm,ranks,data,values,max_err,rms_err,bound,err_over_bound,marked,"
      "lost_nonfinite,verdict\n");
  int failures = 0;
  for (int n : o.ranks) {
    // Every rank count runs the default algorithms, each compressed allreduce by name, and
    // (even counts from 4) the hierarchical plans over two nodes.
    std::vector<std::string> algos = {"auto", "twoshot", "ring", "sparse"};
    if (n >= 4 && n % 2 == 0) algos.push_back("hier");
    const size_t count = (o.count + size_t(n) * 64 - 1) / (size_t(n) * 64) * size_t(n) * 64;
    for (const std::string& algo : algos) {
      setenv("CCL_ALGO", algo.c_str(), 1);
      const bool hier = algo == "hier";
      std::vector<cclComm_t> comms = makeComms(n, hier);
      for (const Shape& s : kShapes) {
        // Named algorithms are the allreduce's; the other collectives run under auto and hier.
        if (s.coll != Coll::kAllReduce && algo != "auto" && !hier) continue;
        if (s.coll == Coll::kAllReduce && algo == "auto") continue;  // auto takes two-shot or ring
        if (s.coll == Coll::kSend && hier) continue;                 // the same sends as under auto
        const int roundTrips = ccl::coll::codecRoundTrips(s.coll, hier ? 2 : n);
        for (cclCodec_t codec : o.codecs) {
          cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
          z.codec = codec;
          for (const std::string& kind : o.data) {
            std::vector<std::vector<float>> in, out;
            const size_t outCount = s.coll == Coll::kAllGather       ? count * size_t(n)
                                    : s.coll == Coll::kReduceScatter ? count / size_t(n)
                                                                     : count;
            for (int r = 0; r < n; ++r) {
              in.push_back(makeData(o, kind, r, count, static_cast<uint32_t>(codec)));
              out.emplace_back(outCount, 0.0f);
            }
            if (!runCase(s.coll, comms, z, in, out, count)) continue;
            Tally t;
            std::vector<double> ref, absIn;
            double absMax = 0;
            for (int r = 0; r < n; ++r) {
              reference(s.coll, in, r, count, ref, absIn);
              for (size_t i = 0; i < ref.size(); ++i)
                if (std::isfinite(absIn[i])) absMax = std::max(absMax, absIn[i]);
            }
            for (int r = 0; r < n; ++r) {
              reference(s.coll, in, r, count, ref, absIn);
              compare(z, roundTrips, ref, absIn, out[size_t(r)], absMax, t);
            }
            const bool ok = t.maxRatio <= 1.0 && t.lostNonFinite == 0;
            failures += ok ? 0 : 1;
            std::printf("%s,%s,%s,%d,%s,%zu,%.4g,%.4g,%s,%s,%zu,%zu,%s\n", cclCodecName(codec), s.name, algo.c_str(), n,
                        kind.c_str(), t.values, t.maxErr, std::sqrt(t.sumSq / double(std::max<size_t>(t.values, 1))),
                        t.bounded ? std::to_string(t.maxBound).c_str() : "none",
                        t.bounded ? std::to_string(t.maxRatio).c_str() : "-", t.marked, t.lostNonFinite,
                        ok ? "ok" : "FAIL");
            std::fflush(stdout);
          }
        }
      }
      for (cclComm_t c : comms) check(cclCommDestroy(c), "cclCommDestroy");
    }
  }
  if (failures)
    std::fprintf(stderr, "accuracy: %d case(s) outside their bound or losing a non-finite value\n", failures);
  return failures ? 1 : 0;
}
