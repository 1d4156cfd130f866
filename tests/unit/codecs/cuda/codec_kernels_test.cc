// SPDX-License-Identifier: BSD-3-Clause
// The CUDA codecs against the CPU codecs: for every codec and option, element type, input
// pattern and size, the GPU encoder must write the CPU's bytes (and the same error-feedback
// residual), and the GPU decoder / decode-accumulate must give the CPU decoder's elements
// bit for bit, reading the CPU's stream (NaN payloads aside: firstDiff).
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codecs/wire.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace ccl::codec::gputest {
namespace {

struct Variant {
  std::string name;
  cclCodec_t codec;
  uint32_t blockSize = 0;  // 0: the codec's default
  bool stochastic = false;
  bool fp16Scales = false;
  bool fp16Values = false;
  double keepRatio = 0.0;  // 0: default
  float threshold = 0.0f;
  bool fixedLength = false;
};

// gtest prints parameters in failure messages and test listings: the name is enough.
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

Params paramsOf(const Variant& v) {
  Params p = defaultParams(v.codec);
  if (v.blockSize) p.blockSize = v.blockSize;
  p.stochastic = v.stochastic;
  p.fp16Scales = v.fp16Scales;
  p.fp16Values = v.fp16Values;
  if (v.keepRatio > 0.0) p.keepRatio = v.keepRatio;
  p.threshold = v.threshold;
  p.seed = 0x1234abcdull;
  p.fixedLength = v.fixedLength;
  return p;
}

std::vector<Variant> variants() {
  std::vector<Variant> v = {{"none", cclCodecNone}};
  for (int code = 0; code < cclNumCodecs; ++code) {
    if (!isQuantizer(code)) continue;
    const auto c = static_cast<cclCodec_t>(code);
    const std::string n = codecInfo(c).name;
    v.push_back({n, c});
    v.push_back({n + "_stochastic", c, 0, true});
    v.push_back({n + "_block32", c, 32});
    v.push_back({n + "_block4096", c, 4096});  // more groups than threads
    Variant fixed{n + "_fixed", c};
    fixed.fixedLength = true;  // non-finite blocks marked, tiny ones at the smallest scale
    v.push_back(fixed);
    fixed.name += "_stochastic";
    fixed.stochastic = true;
    v.push_back(fixed);
    if (codecInfo(c).fp16Scales) {
      v.push_back({n + "_fp16scales", c, 0, false, true});
      v.push_back({n + "_fp16scales_stochastic", c, 0, true, true});
    }
  }
  v.push_back({"topk", cclCodecTopK});
  v.push_back({"topk_dense_fp16", cclCodecTopK, 0, false, false, true, 0.4});  // bitmap indices
  v.push_back({"topk_all", cclCodecTopK, 0, false, false, false, 1.0});
  v.push_back({"randk", cclCodecRandK});
  v.push_back({"randk_fp16", cclCodecRandK, 0, false, false, true, 0.2});
  v.push_back({"threshold", cclCodecThreshold, 0, false, false, false, 0.0, 2.0f});
  v.push_back({"threshold_dense_fp16", cclCodecThreshold, 0, false, false, true, 0.0, 0.3f});
  v.push_back({"threshold_zero", cclCodecThreshold, 0, false, false, false, 0.0, 0.0f});
  return v;
}

const cclDataType_t kTypes[] = {cclFloat32, cclBfloat16, cclFloat16};
const Input kInputs[] = {Input::kNormal, Input::kMixedScales, Input::kSpecials, Input::kTies};
const size_t kSizes[] = {0, 1, 13, 1000, 4103, 100003};

// True when the 4 bytes at `at` of both hold an fp32 NaN (little-endian).
bool bothNaN(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t at) {
  auto nan = [&](const std::vector<uint8_t>& v) {
    uint32_t u = 0;
    std::memcpy(&u, v.data() + at, 4);
    return (u & 0x7fffffffu) > 0x7f800000u;
  };
  return at + 4 <= a.size() && nan(a) && nan(b);
}

// The first byte where the two differ, -1 when none does. An fp32 NaN against an fp32 NaN is
// equal whatever their sign and payload: arithmetic on a NaN gives the canonical NaN
// (0x7fffffff) on a GPU where x86 keeps the operand's payload (x + 0.0f, acc + NaN), and
// IEEE 754 leaves payloads unspecified. A NaN against a number is a difference.
long firstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return static_cast<long>(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    size_t skip = SIZE_MAX;
    for (size_t s = i >= 3 ? i - 3 : 0; s <= i && skip == SIZE_MAX; ++s)
      if (bothNaN(a, b, s)) skip = s + 4;
    if (skip == SIZE_MAX) return static_cast<long>(i);
    i = skip - 1;
  }
  return -1;
}

std::string where(const Variant& v, cclDataType_t type, int input, size_t n, bool ef) {
  return v.name + " type=" + std::to_string(type) + " input=" + std::to_string(input) + " n=" + std::to_string(n) +
         (ef ? " with residual" : "");
}

class GpuCodec : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { CCL_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(GpuCodec, EncoderWritesTheCpuBytesAndResidual) {
  const Variant& v = GetParam();
  const Params p = paramsOf(v);
  std::mt19937 rng(7);
  for (cclDataType_t type : kTypes) {
    for (int in = 0; in < 4; ++in) {
      for (size_t n : kSizes) {
        const std::vector<float> x = makeInput(kInputs[in], n, static_cast<uint32_t>(n * 31 + in), p.blockSize);
        for (bool ef : {false, true}) {
          std::vector<float> e = makeInput(Input::kNormal, n, static_cast<uint32_t>(rng()), p.blockSize);
          for (float& f : e) f *= 0.01f;
          const EncodePair r = encodeBoth(p, x, type, ef ? &e : nullptr);
          const std::string at = where(v, type, in, n, ef);
          ASSERT_EQ(r.gpuBytes, r.cpu.size()) << at;
          ASSERT_EQ(firstDiff(r.cpu, r.gpu), -1) << at << ": streams differ at this byte";
          if (ef) {
            ASSERT_EQ(firstDiff(bytesOf(r.cpuResidual), bytesOf(r.gpuResidual)), -1) << at << ": residual";
          }
        }
      }
    }
  }
}

TEST_P(GpuCodec, DecoderAndAccumulateMatchTheCpu) {
  const Variant& v = GetParam();
  const Params p = paramsOf(v);
  for (int in = 0; in < 4; ++in) {
    for (size_t n : kSizes) {
      const std::vector<float> x = makeInput(kInputs[in], n, static_cast<uint32_t>(n * 17 + in), p.blockSize);
      std::vector<uint8_t> s(maxEncodedBytes(p, n));
      s.resize(encode(p, x.data(), cclFloat32, n, s.data(), s.size()));
      const Expect e{n, p.codec};
      for (cclDataType_t type : kTypes) {
        std::vector<uint8_t> want(n * typeBytes(type));
        decode(s.data(), s.size(), e, want.data(), type);
        uint32_t status = 99;
        const std::vector<uint8_t> got = gpuDecode(s, e, n, type, status);
        ASSERT_EQ(status, 0u) << where(v, type, in, n, false);
        ASSERT_EQ(firstDiff(want, got), -1) << where(v, type, in, n, false) << ": decoded bytes differ";
      }
      std::vector<float> acc = makeInput(Input::kNormal, n, 99, p.blockSize);
      std::vector<float> want = acc;
      decodeAccumulate(s.data(), s.size(), e, want.data());
      uint32_t status = 99;
      const std::vector<float> got = gpuAccumulate(s, e, acc, status);
      ASSERT_EQ(status, 0u) << where(v, cclFloat32, in, n, false);
      ASSERT_EQ(firstDiff(bytesOf(want), bytesOf(got)), -1) << where(v, cclFloat32, in, n, false) << ": accumulate";
    }
  }
}

// Error feedback over several steps stays identical on both sides (the residual feeds the
// next encode, so any difference would grow).
TEST_P(GpuCodec, ErrorFeedbackStepsStayIdentical) {
  const Variant& v = GetParam();
  const Params p = paramsOf(v);
  const size_t n = 5000;
  std::vector<float> e(n, 0.0f);
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> x = makeInput(Input::kNormal, n, 1000 + step, p.blockSize);
    const EncodePair r = encodeBoth(p, x, cclBfloat16, &e);
    ASSERT_EQ(firstDiff(r.cpu, r.gpu), -1) << v.name << " step " << step;
    ASSERT_EQ(firstDiff(bytesOf(r.cpuResidual), bytesOf(r.gpuResidual)), -1) << v.name << " step " << step;
    e = r.cpuResidual;
  }
}

// A batch of encodes (what a device call's wave enqueues: one launch for fixed-length
// quantizer streams, item by item for the rest) writes each item's CPU bytes and residual:
// items of different sizes (empty, shorter than a block, many blocks), their own seeds,
// outputs at odd offsets of one buffer, more items than one launch's table holds.
TEST_P(GpuCodec, ABatchOfEncodesWritesEachItemsCpuBytes) {
  const Variant& v = GetParam();
  if (isLowRank(v.codec)) GTEST_SKIP() << "no GPU low-rank codec";
  const Params p = paramsOf(v);
  const size_t sizes[] = {0, 1, 13, 1000, 4103, 7, 100003};
  constexpr size_t kItems = 170;  // more than one table (160 streams)
  for (cclDataType_t type : {cclFloat32, cclBfloat16}) {
    for (bool ef : {false, true}) {
      std::vector<std::vector<float>> xs, res;
      std::vector<size_t> outAt;
      size_t inBytes = 0, outBytes = 0, resFloats = 0;
      for (size_t k = 0; k < kItems; ++k) {
        const size_t n = sizes[k % std::size(sizes)];
        xs.push_back(makeInput(kInputs[k % 4], n, static_cast<uint32_t>(k * 17 + 3), p.blockSize));
        std::vector<float> e = makeInput(Input::kNormal, n, static_cast<uint32_t>(k + 99), p.blockSize);
        for (float& f : e) f *= 0.01f;
        res.push_back(e);
        inBytes += n * typeBytes(type);
        outAt.push_back(outBytes);
        outBytes += maxEncodedBytes(p, n) + 8 + (k % 3);  // outputs at odd offsets too
        resFloats += n;
      }
      DeviceBuffer din(inBytes + 1), dout(outBytes + 1), dres(resFloats * 4 + 4);
      std::vector<uint8_t> fill(outBytes + 1, 0x5a);
      dout.upload(fill.data(), fill.size());
      std::vector<cuda::EncodeItem> items;
      size_t inAt = 0, resAt = 0;
      for (size_t k = 0; k < kItems; ++k) {
        const size_t n = xs[k].size();
        const std::vector<uint8_t> typed = asType(xs[k], type);
        auto* in = static_cast<uint8_t*>(din.get()) + inAt;
        cudaOk(cudaMemcpy(in, typed.data(), typed.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
        float* r = static_cast<float*>(dres.get()) + resAt;
        cudaOk(cudaMemcpy(r, res[k].data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
        items.push_back(
            {in, n, static_cast<uint8_t*>(dout.get()) + outAt[k], maxEncodedBytes(p, n), ef ? r : nullptr, 0x77u + k});
        inAt += typed.size();
        resAt += n;
      }
      cuda::Workspace ws;
      cudaStream_t stream;
      cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate");
      cuda::encodeBatch(p, type, items, ws, stream);
      cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      cudaOk(cudaStreamDestroy(stream), "cudaStreamDestroy");
      const std::vector<uint8_t> out = dout.download(outBytes + 1);
      const std::vector<uint8_t> gpuRes = dres.download(resFloats * 4 + 4);
      resAt = 0;
      for (size_t k = 0; k < kItems; ++k) {
        const size_t n = xs[k].size();
        Params q = p;
        q.seed = 0x77u + k;
        const std::vector<uint8_t> typed = asType(xs[k], type);
        std::vector<uint8_t> cpu(maxEncodedBytes(p, n), 0xa5);
        std::vector<float> cpuRes = res[k];
        const size_t used = encode(q, typed.data(), type, n, cpu.data(), cpu.size(), ef ? cpuRes.data() : nullptr);
        cpu.resize(used);
        const std::vector<uint8_t> gpu(out.begin() + static_cast<long>(outAt[k]),
                                       out.begin() + static_cast<long>(outAt[k] + used));
        const std::string at = where(v, type, static_cast<int>(k % 4), n, ef) + " item " + std::to_string(k);
        ASSERT_EQ(firstDiff(cpu, gpu), -1) << at << ": streams differ at this byte";
        if (ef) {
          std::vector<uint8_t> g(gpuRes.begin() + static_cast<long>(resAt * 4),
                                 gpuRes.begin() + static_cast<long>((resAt + n) * 4));
          ASSERT_EQ(firstDiff(bytesOf(cpuRes), g), -1) << at << ": residual";
        }
        resAt += n;
      }
    }
  }
}

// A batch of fused hops (a ring's or a two-shot owner's decode-add-encode, one kernel for
// fixed-length quantizer streams) writes each hop's CPU stream and residual
// (codec::decodeAddEncode): local values of fp32 and bf16, sums and averages, received streams
// with marked (non-finite) blocks, more hops than one table holds (120), and one hop whose
// stream names another count: that one writes a failed sender's stream (wire.h) and nothing
// else, the others are right, the status says so.
TEST_P(GpuCodec, ABatchOfFusedHopsWritesTheCpusBytesAndRefusesOnlyTheBadStream) {
  const Variant& v = GetParam();
  const Params p = paramsOf(v);
  if (!cuda::fusesHops(p)) GTEST_SKIP() << "hops of this codec go as a decode and an encode";
  const size_t sizes[] = {0, 1, 13, 1000, 4103, 7, 100003};
  constexpr size_t kItems = 130;
  constexpr size_t kBad = 61;
  const float divisor = 3.0f;
  for (cclDataType_t type : {cclFloat32, cclBfloat16}) {
    std::vector<std::vector<uint8_t>> streams, locals;
    std::vector<std::vector<float>> res;
    std::vector<size_t> inAt, localAt, outAt, resAt;
    size_t inBytes = 0, localBytes = 0, outBytes = 0, resFloats = 0;
    for (size_t k = 0; k < kItems; ++k) {
      const size_t n = sizes[k % std::size(sizes)];
      const std::vector<float> x = makeInput(kInputs[k % 4], n, static_cast<uint32_t>(k * 11 + 5), p.blockSize);
      std::vector<uint8_t> st(maxEncodedBytes(p, n));
      st.resize(encode(p, x.data(), cclFloat32, n, st.data(), st.size()));
      streams.push_back(st);
      locals.push_back(asType(makeInput(kInputs[(k + 1) % 4], n, static_cast<uint32_t>(k + 7), p.blockSize), type));
      std::vector<float> e = makeInput(Input::kNormal, n, static_cast<uint32_t>(k + 501), p.blockSize);
      for (float& f : e) f *= 0.01f;
      res.push_back(e);
      inAt.push_back(inBytes);
      inBytes += st.size() + 3 + (k % 5);
      localAt.push_back(localBytes);
      localBytes += locals.back().size() + 16;
      outAt.push_back(outBytes);
      outBytes += maxEncodedBytes(p, n) + 8 + (k % 3);
      resAt.push_back(resFloats);
      resFloats += n;
    }
    DeviceBuffer din(inBytes + 1), dlocal(localBytes + 1), dout(outBytes + 1), dres(resFloats * 4 + 4), dstatus(4);
    std::vector<uint8_t> fill(outBytes + 1, 0x5a);
    dout.upload(fill.data(), fill.size());
    const uint32_t junk = 0xdead;
    dstatus.upload(&junk, 4);
    std::vector<cuda::HopItem> items;
    for (size_t k = 0; k < kItems; ++k) {
      const size_t n = sizes[k % std::size(sizes)];
      auto* in = static_cast<uint8_t*>(din.get()) + inAt[k];
      cudaOk(cudaMemcpy(in, streams[k].data(), streams[k].size(), cudaMemcpyHostToDevice), "cudaMemcpy");
      auto* local = static_cast<uint8_t*>(dlocal.get()) + localAt[k];
      cudaOk(cudaMemcpy(local, locals[k].data(), locals[k].size(), cudaMemcpyHostToDevice), "cudaMemcpy");
      float* r = static_cast<float*>(dres.get()) + resAt[k];
      cudaOk(cudaMemcpy(r, res[k].data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      items.push_back({in, k == kBad ? size_t{16} : streams[k].size(), local, n,
                       static_cast<uint8_t*>(dout.get()) + outAt[k], maxEncodedBytes(p, n), k % 2 ? r : nullptr,
                       0x99u + k, k % 3 == 0});
    }
    cuda::Workspace ws;
    cudaStream_t stream;
    cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate");
    cuda::decodeAddEncodeBatch(p, type, divisor, items, static_cast<uint32_t*>(dstatus.get()), ws, stream);
    cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaOk(cudaStreamDestroy(stream), "cudaStreamDestroy");
    uint32_t status = 0;
    const std::vector<uint8_t> sb = dstatus.download(4);
    std::memcpy(&status, sb.data(), 4);
    EXPECT_EQ(status, static_cast<uint32_t>(cuda::kStatusBadHeader)) << v.name;
    const std::vector<uint8_t> out = dout.download(outBytes + 1);
    const std::vector<uint8_t> gpuRes = dres.download(resFloats * 4 + 4);
    for (size_t k = 0; k < kItems; ++k) {
      const size_t n = sizes[k % std::size(sizes)];
      const std::string at = v.name + (type == cclFloat32 ? " fp32" : " bf16") + " hop " + std::to_string(k);
      std::vector<float> cpuRes = res[k];
      std::vector<uint8_t> cpu(maxEncodedBytes(p, n), 0x5a);
      if (k == kBad) {
        writeFailedSender(cpu.data(), cpu.size());
      } else {
        Params q = p;
        q.seed = 0x99u + k;
        cpu.resize(decodeAddEncode(q, streams[k].data(), streams[k].size(), Expect{n, p.codec}, locals[k].data(), type,
                                   n, k % 3 == 0 ? divisor : 1.0f, cpu.data(), cpu.size(),
                                   k % 2 ? cpuRes.data() : nullptr));
      }
      const std::vector<uint8_t> gpu(out.begin() + static_cast<long>(outAt[k]),
                                     out.begin() + static_cast<long>(outAt[k] + cpu.size()));
      ASSERT_EQ(firstDiff(cpu, gpu), -1) << at << ": streams differ at this byte";
      std::vector<uint8_t> g(gpuRes.begin() + static_cast<long>(resAt[k] * 4),
                             gpuRes.begin() + static_cast<long>((resAt[k] + n) * 4));
      ASSERT_EQ(firstDiff(bytesOf(cpuRes), g), -1) << at << ": residual";
    }
  }
}

// The encodes of a call that has failed before them (Workspace::poison: the call's status
// word, set) write a failed sender's stream, which the GPU's decode refuses with its own
// status bit and the CPU's as a remote error; with the word clear they write the CPU's bytes.
// Batched and alone (whose length is the header's).
TEST_P(GpuCodec, EncodesOfAFailedCallWriteAFailedSendersStream) {
  const Variant& v = GetParam();
  if (isLowRank(v.codec)) GTEST_SKIP() << "no GPU low-rank codec";
  const Params p = paramsOf(v);
  const size_t sizes[] = {1, 1000, 4103};
  std::vector<std::vector<float>> xs;
  std::vector<size_t> inAt, outAt;
  size_t inBytes = 0, outBytes = 0;
  for (size_t n : sizes) {
    xs.push_back(makeInput(Input::kNormal, n, static_cast<uint32_t>(n), p.blockSize));
    inAt.push_back(inBytes);
    inBytes += n * 4;
    outAt.push_back(outBytes);
    outBytes += maxEncodedBytes(p, n);
  }
  for (const uint32_t word : {0u, static_cast<uint32_t>(cuda::kStatusBadScale)}) {
    DeviceBuffer din(inBytes), dout(outBytes + maxEncodedBytes(p, sizes[0])), dword(4), dlen(8), dstatus(4);
    dword.upload(&word, 4);
    std::vector<cuda::EncodeItem> items;
    for (size_t k = 0; k < std::size(sizes); ++k) {
      auto* in = static_cast<uint8_t*>(din.get()) + inAt[k];
      cudaOk(cudaMemcpy(in, xs[k].data(), sizes[k] * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      items.push_back({in, sizes[k], static_cast<uint8_t*>(dout.get()) + outAt[k], maxEncodedBytes(p, sizes[k]),
                       nullptr, 0x31u + k});
    }
    auto* alone = static_cast<uint8_t*>(dout.get()) + outBytes;
    cuda::Workspace ws;
    ws.poison = static_cast<const uint32_t*>(dword.get());
    cudaStream_t stream;
    cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate");
    cuda::encodeBatch(p, cclFloat32, items, ws, stream);
    cuda::encode(p, items[0].x, cclFloat32, sizes[0], alone, maxEncodedBytes(p, sizes[0]), nullptr,
                 static_cast<uint64_t*>(dlen.get()), ws, stream);
    ws.poison = nullptr;
    cuda::decode(items[1].out, items[1].outBytes, Expect{sizes[1], p.codec}, din.get(), cclFloat32,
                 static_cast<uint32_t*>(dstatus.get()), ws, stream);
    cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaOk(cudaStreamDestroy(stream), "cudaStreamDestroy");
    const std::vector<uint8_t> out = dout.download(dout.bytes());
    uint64_t length = 0;
    uint32_t status = 0;
    std::memcpy(&length, dlen.download(8).data(), 8);
    std::memcpy(&status, dstatus.download(4).data(), 4);
    std::vector<uint8_t> failed(kHeaderBytes);
    writeFailedSender(failed.data(), failed.size());
    for (size_t k = 0; k <= std::size(sizes); ++k) {
      const size_t n = sizes[k % std::size(sizes)];
      const size_t at = k < std::size(sizes) ? outAt[k] : outBytes;
      const std::string where = v.name + " item " + std::to_string(k) + (word ? " (the call failed)" : "");
      std::vector<uint8_t> cpu(maxEncodedBytes(p, n));
      Params q = p;
      q.seed = k < std::size(sizes) ? 0x31u + k : p.seed;
      cpu.resize(word ? kHeaderBytes
                      : encode(q, xs[k % std::size(sizes)].data(), cclFloat32, n, cpu.data(), cpu.size()));
      const std::vector<uint8_t> gpu(out.begin() + static_cast<long>(at),
                                     out.begin() + static_cast<long>(at + cpu.size()));
      ASSERT_EQ(firstDiff(word ? failed : cpu, gpu), -1) << where << ": streams differ at this byte";
    }
    if (word) {
      EXPECT_EQ(length, kHeaderBytes) << v.name << ": the length of a failed sender's stream";
      EXPECT_EQ(status, static_cast<uint32_t>(cuda::kStatusFailedSender)) << v.name;
      std::vector<float> y(sizes[1]);
      try {
        decode(out.data() + outAt[1], maxEncodedBytes(p, sizes[1]), Expect{sizes[1], p.codec}, y.data(), cclFloat32);
        ADD_FAILURE() << v.name << ": the CPU decoded a failed sender's stream";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclRemoteError) << e.what();
      }
    } else {
      EXPECT_EQ(status, 0u) << v.name;
    }
  }
}

// A batch of fused hops of a call that had failed before it (its status word set, ORed
// into): every hop writes a failed sender's stream, and the word stays set.
TEST_P(GpuCodec, FusedHopsOfAFailedCallWriteAFailedSendersStream) {
  const Variant& v = GetParam();
  const Params p = paramsOf(v);
  if (!cuda::fusesHops(p)) GTEST_SKIP() << "hops of this codec go as a decode and an encode";
  const size_t n = 4103;
  const std::vector<float> x = makeInput(Input::kNormal, n, 5u, p.blockSize);
  std::vector<uint8_t> st(maxEncodedBytes(p, n));
  st.resize(encode(p, x.data(), cclFloat32, n, st.data(), st.size()));
  constexpr size_t kHops = 3;
  const size_t room = maxEncodedBytes(p, n);
  DeviceBuffer din(st.size()), dlocal(n * 4), dout(room * kHops), dstatus(4);
  din.upload(st.data(), st.size());
  dlocal.upload(x.data(), n * 4);
  std::vector<uint8_t> fill(room * kHops, 0x5a);
  dout.upload(fill.data(), fill.size());
  const uint32_t before = cuda::kStatusBadIndices;
  dstatus.upload(&before, 4);
  std::vector<cuda::HopItem> items;
  for (size_t k = 0; k < kHops; ++k)
    items.push_back({din.get(), st.size(), dlocal.get(), n, static_cast<uint8_t*>(dout.get()) + k * room, room, nullptr,
                     0x51u + k, false});
  cuda::Workspace ws;
  ws.orStatus = true;
  cudaStream_t stream;
  cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate");
  cuda::decodeAddEncodeBatch(p, cclFloat32, 1.0f, items, static_cast<uint32_t*>(dstatus.get()), ws, stream);
  cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaOk(cudaStreamDestroy(stream), "cudaStreamDestroy");
  uint32_t status = 0;
  std::memcpy(&status, dstatus.download(4).data(), 4);
  EXPECT_EQ(status, before) << v.name;
  std::vector<uint8_t> failed(kHeaderBytes);
  writeFailedSender(failed.data(), failed.size());
  const std::vector<uint8_t> out = dout.download(room * kHops);
  for (size_t k = 0; k < kHops; ++k)
    ASSERT_EQ(firstDiff(failed, std::vector<uint8_t>(out.begin() + static_cast<long>(k * room),
                                                     out.begin() + static_cast<long>(k * room + kHeaderBytes))),
              -1)
        << v.name << " hop " << k;
}

// A batch of decodes (a device call's wave: three launches for quantizer streams, stream by
// stream for the rest) gives each stream's CPU elements, decoded or added, with streams at
// odd offsets, more than one table's worth (240), and one corrupt stream among them: that
// one's elements stay untouched, every other stream is decoded, and the status word says so.
TEST_P(GpuCodec, ABatchOfDecodesMatchesTheCpuAndRefusesOnlyTheBadStream) {
  const Variant& v = GetParam();
  const Params p = paramsOf(v);
  const size_t sizes[] = {0, 1, 13, 1000, 4103, 7, 100003};
  constexpr size_t kItems = 250;
  constexpr size_t kBad = 123;  // its header names another element count
  std::vector<std::vector<uint8_t>> streams;
  std::vector<size_t> at;
  size_t total = 0, elems = 0;
  for (size_t k = 0; k < kItems; ++k) {
    const size_t n = sizes[k % std::size(sizes)];
    const std::vector<float> x = makeInput(kInputs[k % 4], n, static_cast<uint32_t>(k * 13 + 1), p.blockSize);
    std::vector<uint8_t> st(maxEncodedBytes(p, n));
    st.resize(encode(p, x.data(), cclFloat32, n, st.data(), st.size()));
    streams.push_back(st);
    at.push_back(total);
    total += st.size() + 5 + (k % 4);
    elems += n;
  }
  DeviceBuffer din(total + 1);
  for (size_t k = 0; k < kItems; ++k)
    cudaOk(cudaMemcpy(static_cast<uint8_t*>(din.get()) + at[k], streams[k].data(), streams[k].size(),
                      cudaMemcpyHostToDevice),
           "cudaMemcpy");
  for (const bool accumulate : {false, true}) {
    const cclDataType_t type = accumulate ? cclFloat32 : cclBfloat16;
    const size_t es = typeBytes(type);
    std::vector<uint8_t> y0(elems * es + 4);
    for (size_t i = 0; i < y0.size(); ++i) y0[i] = static_cast<uint8_t>(i * 7);  // finite bf16 and fp32 patterns
    DeviceBuffer dy(y0.size()), dstatus(4);
    dy.upload(y0.data(), y0.size());
    const uint32_t junk = 0xdead;
    dstatus.upload(&junk, 4);
    std::vector<cuda::DecodeRequest> items;
    size_t yAt = 0;
    for (size_t k = 0; k < kItems; ++k) {
      const size_t n = sizes[k % std::size(sizes)];
      items.push_back({static_cast<uint8_t*>(din.get()) + at[k], streams[k].size(), k == kBad ? n + 1 : n,
                       static_cast<uint8_t*>(dy.get()) + yAt * es});
      yAt += n;
    }
    cuda::Workspace ws;  // orStatus false: the batch stores its status
    cudaStream_t stream;
    cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate");
    cuda::decodeBatch(items, p.codec, type, accumulate, static_cast<uint32_t*>(dstatus.get()), ws, stream);
    cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaOk(cudaStreamDestroy(stream), "cudaStreamDestroy");
    uint32_t status = 0;
    const std::vector<uint8_t> sb = dstatus.download(4);
    std::memcpy(&status, sb.data(), 4);
    EXPECT_EQ(status, static_cast<uint32_t>(cuda::kStatusBadHeader)) << v.name;
    const std::vector<uint8_t> got = dy.download(y0.size());
    yAt = 0;
    for (size_t k = 0; k < kItems; ++k) {
      const size_t n = sizes[k % std::size(sizes)];
      std::vector<uint8_t> want(y0.begin() + static_cast<long>(yAt * es),
                                y0.begin() + static_cast<long>((yAt + n) * es));
      if (k != kBad) {
        const Expect e{n, p.codec};
        if (accumulate) {
          std::vector<float> acc(n);
          std::memcpy(acc.data(), want.data(), n * 4);
          decodeAccumulate(streams[k].data(), streams[k].size(), e, acc.data());
          want = bytesOf(acc);
        } else {
          decode(streams[k].data(), streams[k].size(), e, want.data(), type);
        }
      }
      const std::vector<uint8_t> mine(got.begin() + static_cast<long>(yAt * es),
                                      got.begin() + static_cast<long>((yAt + n) * es));
      ASSERT_EQ(firstDiff(want, mine), -1) << v.name << " item " << k << (accumulate ? " accumulate" : " decode");
      yAt += n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, GpuCodec, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

}  // namespace
}  // namespace ccl::codec::gputest
