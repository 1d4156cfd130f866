// SPDX-License-Identifier: BSD-3-Clause
// Single-thread codec throughput in GB/s of fp32 input, printed with its ratio to two
// baselines measured in the same run over fp32 arrays of the same size, all in thread CPU
// time: the read loop (a sum with enough independent accumulators that it is limited by
// loads, not by add latency; x_read) and the update loop y += x (x_update), which moves the
// bytes a decode-accumulate moves when its codes are as wide as fp32.
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/vector_clones.h"

namespace {

// Thread CPU time: the machine is shared, and wall time would count other processes' slices.
double cpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

const std::vector<size_t> kBytes = {64 << 10, 1 << 20, 64 << 20};

std::vector<float> input(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

CCL_VECTOR_CLONES float sumArray(const float* x, size_t n) {
  constexpr int kLanes = 32;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  float s = 0;
  for (; i < n; ++i) s += x[i];
  for (float a : acc) s += a;
  return s;
}

// y += x over fp32 arrays: the loop a decode-accumulate would be if its codes were fp32
// (it reads twice and writes once what the read loop reads once).
CCL_VECTOR_CLONES void addArray(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

enum class Baseline { kRead, kUpdate };

// One pass of a baseline over arrays of `bytes`.
struct BaselineArrays {
  std::vector<float> x, y;
  explicit BaselineArrays(size_t bytes) : x(input(bytes / 4)), y(bytes / 4, 0.0f) {}
  void run(Baseline b) {
    if (b == Baseline::kRead) {
      benchmark::DoNotOptimize(sumArray(x.data(), x.size()));
    } else {
      addArray(x.data(), y.data(), x.size());
      benchmark::ClobberMemory();
    }
  }
};

// A baseline's bandwidth (bytes of x per second) per size, best of 5, measured when the
// first benchmark of a size asks.
double baselineRate(Baseline b, size_t bytes) {
  static std::map<std::pair<Baseline, size_t>, double> rates;
  if (auto it = rates.find({b, bytes}); it != rates.end()) return it->second;
  BaselineArrays a(bytes);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const size_t iters = std::max<size_t>(1, (256u << 20) / bytes);
    const double t0 = cpuSeconds();
    for (size_t it = 0; it < iters; ++it) a.run(b);
    const double s = cpuSeconds() - t0;
    best = std::max(best, bytes * static_cast<double>(iters) / s);
  }
  return rates[{b, bytes}] = best;
}

// Every row has the same counters (CSV and JSON output need that); bits_per_elem is 32 for
// the fp32 baselines.
void setRatio(benchmark::State& state, size_t bytes, double seconds, double bitsPerElem) {
  const double rate = bytes * static_cast<double>(state.iterations()) / seconds;
  state.counters["GBps"] = rate / 1e9;
  state.counters["read_GBps"] = baselineRate(Baseline::kRead, bytes) / 1e9;
  state.counters["x_read"] = rate / baselineRate(Baseline::kRead, bytes);
  state.counters["x_update"] = rate / baselineRate(Baseline::kUpdate, bytes);
  state.counters["bits_per_elem"] = bitsPerElem;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
}

void benchBaseline(benchmark::State& state, Baseline b) {
  const size_t bytes = state.range(0);
  BaselineArrays a(bytes);
  const double t0 = cpuSeconds();
  for (auto _ : state) a.run(b);
  setRatio(state, bytes, cpuSeconds() - t0, 32.0);
}

enum class Op { kEncode, kDecode, kDecodeAccumulate };

void benchCodec(benchmark::State& state, cclCodec_t codec, Op op) {
  const size_t bytes = state.range(0);
  const size_t n = bytes / 4;
  ccl::codec::Params p = ccl::codec::defaultParams(codec);
  p.threshold = 2.576f;  // keeps about 1% of a standard normal input, like topk's default
  const auto x = input(n);
  std::vector<uint8_t> s(ccl::codec::maxEncodedBytes(p, n));
  s.resize(ccl::codec::encode(p, x.data(), cclFloat32, n, s.data(), s.size()));
  std::vector<float> y(n, 0.0f);
  const ccl::codec::Expect expect{n, codec};
  const double t0 = cpuSeconds();
  for (auto _ : state) {
    switch (op) {
      case Op::kEncode:
        benchmark::DoNotOptimize(ccl::codec::encode(p, x.data(), cclFloat32, n, s.data(), s.capacity()));
        break;
      case Op::kDecode:
        ccl::codec::decode(s.data(), s.size(), expect, y.data(), cclFloat32);
        break;
      case Op::kDecodeAccumulate:
        ccl::codec::decodeAccumulate(s.data(), s.size(), expect, y.data());
        break;
    }
    benchmark::ClobberMemory();
  }
  setRatio(state, bytes, cpuSeconds() - t0, 8.0 * static_cast<double>(s.size()) / static_cast<double>(n));
}

void registerAll() {
  auto sizes = [](benchmark::internal::Benchmark* b) {
    for (size_t bytes : kBytes) b->Arg(static_cast<int64_t>(bytes));
    b->Unit(benchmark::kMicrosecond)->MinTime(0.2);
  };
  sizes(benchmark::RegisterBenchmark("read", [](benchmark::State& st) { benchBaseline(st, Baseline::kRead); }));
  sizes(benchmark::RegisterBenchmark("update", [](benchmark::State& st) { benchBaseline(st, Baseline::kUpdate); }));
  const std::pair<Op, const char*> ops[] = {
      {Op::kEncode, "encode"}, {Op::kDecode, "decode"}, {Op::kDecodeAccumulate, "decode_acc"}};
  for (int c = 0; c < cclNumCodecs; ++c) {
    for (auto [op, name] : ops) {
      const auto codec = static_cast<cclCodec_t>(c);
      const std::string label = std::string(name) + "/" + cclCodecName(codec);
      sizes(benchmark::RegisterBenchmark(label.c_str(),
                                         [codec, op = op](benchmark::State& st) { benchCodec(st, codec, op); }));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
