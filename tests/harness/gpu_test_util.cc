// SPDX-License-Identifier: BSD-3-Clause
#include "gpu_test_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "common/floatconv.h"

namespace ccl::codec::gputest {

std::string noDeviceReason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e);
  if (count == 0) return "cudaGetDeviceCount reports 0 devices";
  return "";
}

void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  // One extra allocation unit so zero-sized buffers still have a valid, distinct address.
  cudaOk(cudaMalloc(&ptr_, bytes + 16), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() { cudaFree(ptr_); }

void DeviceBuffer::upload(const void* src, size_t bytes) {
  if (bytes) cudaOk(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

std::vector<uint8_t> DeviceBuffer::download(size_t bytes) const {
  std::vector<uint8_t> out(bytes);
  if (bytes) cudaOk(cudaMemcpy(out.data(), ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return out;
}

size_t typeBytes(cclDataType_t type) { return type == cclFloat32 ? 4 : 2; }

std::vector<uint8_t> asType(const std::vector<float>& x, cclDataType_t type) {
  std::vector<uint8_t> out(x.size() * typeBytes(type));
  for (size_t i = 0; i < x.size(); ++i) {
    if (type == cclFloat32) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    } else {
      const uint16_t h = type == cclBfloat16 ? fp::floatToBf16(x[i]) : fp::floatToHalf(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<uint8_t> bytesOf(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> makeInput(Input kind, size_t n, uint32_t seed, uint32_t blockSize) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  const uint32_t bs = blockSize ? blockSize : 128;
  for (size_t i = 0; i < n; ++i) {
    const size_t block = i / bs;
    switch (kind) {
      case Input::kNormal:
        x[i] = normal(rng);
        break;
      case Input::kMixedScales:
        // Each block its own magnitude, from denormal (raw with fp32 scales) to huge.
        x[i] = std::ldexp(normal(rng), static_cast<int>(block * 37 % 260) - 140);
        break;
      case Input::kSpecials: {
        const uint32_t r = rng() % 211;
        x[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : r < 12 ? -0.0f : r < 20 ? 0.0f : normal(rng);
        break;
      }
      case Input::kTies:
        x[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f;
        break;
    }
  }
  return x;
}

EncodePair encodeBoth(const Params& p, const std::vector<float>& x, cclDataType_t type,
                      const std::vector<float>* residual) {
  const size_t n = x.size();
  const std::vector<uint8_t> typed = asType(x, type);
  EncodePair r;
  const size_t cap = maxEncodedBytes(p, n);
  r.cpu.assign(cap, 0xa5);
  if (residual) r.cpuResidual = *residual;
  const size_t used = encode(p, typed.data(), type, n, r.cpu.data(), cap, residual ? r.cpuResidual.data() : nullptr);
  r.cpu.resize(used);

  DeviceBuffer dx(typed.size()), dout(cap), dres(n * 4), dsize(8);
  dx.upload(typed.data(), typed.size());
  std::vector<uint8_t> fill(cap, 0x5a);  // different garbage than the CPU's: padding must be written
  dout.upload(fill.data(), cap);
  if (residual) dres.upload(residual->data(), n * 4);
  cuda::Workspace ws;
  cudaStream_t stream;
  cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate");
  cuda::encode(p, dx.get(), type, n, dout.get(), cap, residual ? static_cast<float*>(dres.get()) : nullptr,
               static_cast<uint64_t*>(dsize.get()), ws, stream);
  cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaOk(cudaStreamDestroy(stream), "cudaStreamDestroy");
  const std::vector<uint8_t> size = dsize.download(8);
  std::memcpy(&r.gpuBytes, size.data(), 8);
  r.gpu = dout.download(std::min<uint64_t>(r.gpuBytes, cap));
  if (residual) {
    r.gpuResidual.resize(n);
    const std::vector<uint8_t> b = dres.download(n * 4);
    if (n) std::memcpy(r.gpuResidual.data(), b.data(), n * 4);
  }
  return r;
}

namespace {

std::vector<uint8_t> runDecode(const std::vector<uint8_t>& stream, const Expect& e, std::vector<uint8_t> y,
                               cclDataType_t type, bool accumulate, uint32_t& status) {
  DeviceBuffer din(stream.size()), dy(y.size()), dstatus(4);
  din.upload(stream.data(), stream.size());
  dy.upload(y.data(), y.size());
  cuda::Workspace ws;
  const uint32_t zero = 0;
  dstatus.upload(&zero, 4);  // every test sees the decode's own status
  auto* st = static_cast<uint32_t*>(dstatus.get());
  if (accumulate) {
    cuda::decodeAccumulate(din.get(), stream.size(), e, static_cast<float*>(dy.get()), st, ws, nullptr);
  } else {
    cuda::decode(din.get(), stream.size(), e, dy.get(), type, st, ws, nullptr);
  }
  cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const std::vector<uint8_t> s = dstatus.download(4);
  std::memcpy(&status, s.data(), 4);
  return dy.download(y.size());
}

}  // namespace

std::vector<uint8_t> gpuDecode(const std::vector<uint8_t>& stream, const Expect& e, size_t n, cclDataType_t type,
                               uint32_t& status) {
  return runDecode(stream, e, std::vector<uint8_t>(n * typeBytes(type), 0x7b), type, false, status);
}

std::vector<float> gpuAccumulate(const std::vector<uint8_t>& stream, const Expect& e, const std::vector<float>& acc,
                                 uint32_t& status) {
  const std::vector<uint8_t> b = runDecode(stream, e, bytesOf(acc), cclFloat32, true, status);
  std::vector<float> out(acc.size());
  if (!out.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

}  // namespace ccl::codec::gputest
