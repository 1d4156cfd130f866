// SPDX-License-Identifier: BSD-3-Clause
// Entry points of the CUDA codecs: argument checks on the host (the same as codec::encode and
// codec::decode, thrown before anything is enqueued), the workspace, the shared decode
// prologue/epilogue, codec "none", and dispatch to the quantizer and sparsifier kernels.
#include <string>

#include "codecs/cuda/codec_kernels.h"
#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/math/feedback_add.h"
#include "common/activity.h"
#include "common/kernel_registry.h"

namespace ccl::codec::cuda {

Workspace::~Workspace() {
  // Stream-ordered on a stream of its own, so the free waits for no other stream (cudaFree
  // waits for the whole device, where another communicator's work may wait for its peers).
  // The work that used the workspace has run: its owner synchronised it before going.
  if (ptr_) cudaFreeAsync(ptr_, cudaStreamPerThread);  // errors cannot leave a destructor
}

void* Workspace::get(size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_ && ptr_) return ptr_;
  ActivityScope busy("growing the codec workspace (cudaFreeAsync, cudaMallocAsync)");
  if (ptr_) check(cudaFreeAsync(ptr_, stream), "cudaFreeAsync");
  ptr_ = nullptr;
  bytes_ = 0;
  const size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
  check(cudaMallocAsync(&ptr_, want, stream), "cudaMallocAsync (codec workspace)");
  bytes_ = want;
  return ptr_;
}

void throwIfInvalid(uint32_t status) {
  if (status == 0) return;
  std::string what = "compressed stream (GPU decode):";
  if (status & kStatusBadHeader) what += " bad header or unexpected codec/count;";
  if (status & kStatusBadScale) what += " invalid block scale;";
  if (status & kStatusBadRawBlocks) what += " bad raw block entries;";
  if (status & kStatusBadIndices) what += " bad index section;";
  if (status & kStatusFailedSender)
    what.append(" ").append(headerProblem(failedSenderHeader(), kHeaderBytes)).append(";");
  throw Error(status == kStatusFailedSender ? cclRemoteError : cclInvalidUsage, what);
}

namespace {

// One thread: clears the state (no cudaMemsetAsync: one command fewer per decode, and no
// memset on the hot path), then reads and checks the header.
__global__ void readHeaderKernel(const uint8_t* in, uint64_t inBytes, uint64_t count, int codec, DecodeState* st) {
  readHeaderInto(in, inBytes, count, codec, st);
}

// Decodes of one stream run in order, so a plain read-modify-write suffices for orInto.
__global__ void copyStatus(const DecodeState* st, uint32_t* status, bool orInto) {
  if (!orInto)
    *status = st->status;
  else if (st->status)
    *status |= st->status;
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&copyStatus);

constexpr unsigned kThreads = 256;

// Codec none: the elements as fp32 with their residual (math::withResidual), as codec::encode
// writes them (a failed sender's header where `poison` says so: Workspace::poison).
template <class T>
__global__ void __launch_bounds__(kThreads)
    encodeNone(const typename T::Storage* x, uint64_t n, uint8_t* out, float* residual, uint64_t* encodedBytes,
               const uint32_t* poison) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = math::withResidual(T::load(x, i), residual, i);
    storeLe(out + kHeaderBytes + 4 * i, fp::floatBits(v), 4);
    if (residual) residual[i] = 0.0f;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const bool failed = callFailed(poison);
    Header h;
    h.count = n;
    storeHeader(failed ? failedSenderHeader() : h, out);
    if (encodedBytes) *encodedBytes = failed ? kHeaderBytes : kHeaderBytes + 4 * n;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    decodeNone(const uint8_t* in, const DecodeState* st, typename T::Storage* y, float* acc) {
  if (st->status) return;
  const uint64_t n = st->h.count;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = fp::bitsFloat(loadLe(in + kHeaderBytes + 4 * i, 4));
    if (acc) {
      acc[i] += v;
    } else {
      T::store(y, i, v);
    }
  }
}

void checkEncodeArgs(const Params& p, const void* x, size_t n, void* out, size_t outBytes) {
  const size_t need = maxEncodedBytes(p, n);  // also validates p and n
  if (outBytes < need)
    throw Error(cclInvalidArgument,
                "encode: output buffer of " + std::to_string(outBytes) + " bytes, needs " + std::to_string(need));
  if (!out || (n > 0 && !x)) throw Error(cclInvalidArgument, "encode: null buffer");
}

void decodeAny(const void* in, size_t inBytes, const Expect& expect, detail::Target target, uint32_t* status,
               Workspace& ws, cudaStream_t stream) {
  if (expect.codec >= cclNumCodecs || expect.codec < 0)
    throw Error(cclInvalidArgument, "GPU decode: the expected codec must be named");
  if (!status) throw Error(cclInvalidArgument, "GPU decode: null status word");
  if (isLowRank(expect.codec))
    throw Error(cclInvalidArgument, "GPU decode: the GPU codecs have no low-rank (powersgd) kernels");
  if ((expect.count > 0 && !target.y) || (!in && inBytes > 0))
    throw Error(cclInvalidArgument, "GPU decode: null buffer");
  if (!target.accumulate) withDeviceType(target.type, [](auto) {});  // rejects other types
  const auto* i = static_cast<const uint8_t*>(in);
  if (isQuantizer(expect.codec)) return detail::quantizerDecode(i, inBytes, expect, target, status, ws, stream);
  if (isSparsifier(expect.codec)) return detail::sparsifierDecode(i, inBytes, expect, target, status, ws, stream);
  auto* st = static_cast<DecodeState*>(ws.get(sizeof(DecodeState), stream));
  startDecode(in, inBytes, expect, st, stream);
  const unsigned grid = gridFor(expect.count, kThreads);
  if (target.accumulate) {
    decodeNone<DevF32><<<grid, kThreads, 0, stream>>>(i, st, nullptr, static_cast<float*>(target.y));
  } else {
    withDeviceType(target.type, [&](auto tag) {
      using T = decltype(tag);
      decodeNone<T><<<grid, kThreads, 0, stream>>>(i, st, static_cast<typename T::Storage*>(target.y), nullptr);
    });
  }
  checkLaunch("decodeNone");
  finishDecode(st, status, ws.orStatus, stream);
}

}  // namespace

void startDecode(const void* in, size_t inBytes, const Expect& expect, DecodeState* st, cudaStream_t stream) {
  readHeaderKernel<<<1, 1, 0, stream>>>(static_cast<const uint8_t*>(in), inBytes, expect.count, expect.codec, st);
  checkLaunch("readHeaderKernel");
}

void finishDecode(DecodeState* st, uint32_t* status, bool orInto, cudaStream_t stream) {
  // A kernel rather than a copy: `status` may be device, managed or host-mapped memory.
  copyStatus<<<1, 1, 0, stream>>>(st, status, orInto);
  checkLaunch("copyStatus");
}

void encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes, float* residual,
            uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream) {
  checkEncodeArgs(p, x, n, out, outBytes);
  if (isLowRank(p.codec)) throw Error(cclInvalidArgument, "encode: the GPU codecs have no low-rank (powersgd) kernels");
  withDeviceType(type, [](auto) {});  // rejects other types before anything is enqueued
  auto* o = static_cast<uint8_t*>(out);
  if (isQuantizer(p.codec)) return detail::quantizerEncode(p, x, type, n, o, residual, encodedBytes, ws, stream);
  if (isSparsifier(p.codec)) return detail::sparsifierEncode(p, x, type, n, o, residual, encodedBytes, ws, stream);
  withDeviceType(type, [&](auto tag) {
    using T = decltype(tag);
    encodeNone<T><<<gridFor(n, kThreads), kThreads, 0, stream>>>(static_cast<const typename T::Storage*>(x), n, o,
                                                                 residual, encodedBytes, ws.poison);
  });
  checkLaunch("encodeNone");
}

void encodeBatch(const Params& p, cclDataType_t type, std::span<const EncodeItem> items, Workspace& ws,
                 cudaStream_t stream) {
  for (const EncodeItem& it : items) checkEncodeArgs(p, it.x, it.n, it.out, it.outBytes);
  if (isLowRank(p.codec)) throw Error(cclInvalidArgument, "encode: the GPU codecs have no low-rank (powersgd) kernels");
  withDeviceType(type, [](auto) {});
  if (isQuantizer(p.codec) && detail::quantizerEncodeBatch(p, type, items, ws, stream)) return;
  for (const EncodeItem& it : items) {
    Params q = p;
    q.seed = it.seed;
    encode(q, it.x, type, it.n, it.out, it.outBytes, it.residual, nullptr, ws, stream);
  }
}

void decodeBatch(std::span<const DecodeRequest> items, int codec, cclDataType_t type, bool accumulate, uint32_t* status,
                 Workspace& ws, cudaStream_t stream) {
  if (items.empty()) return;
  if (codec >= cclNumCodecs || codec < 0)
    throw Error(cclInvalidArgument, "GPU decode: the expected codec must be named");
  if (!status) throw Error(cclInvalidArgument, "GPU decode: null status word");
  if (!accumulate) withDeviceType(type, [](auto) {});
  for (const DecodeRequest& r : items)
    if ((r.count > 0 && !r.y) || (!r.in && r.inBytes > 0)) throw Error(cclInvalidArgument, "GPU decode: null buffer");
  if (isQuantizer(codec))
    return detail::quantizerDecodeBatch(items, codec,
                                        detail::Target{nullptr, accumulate ? cclFloat32 : type, accumulate}, status,
                                        ws.orStatus, ws, stream);
  const bool orStatus = ws.orStatus;
  for (size_t k = 0; k < items.size(); ++k) {
    ws.orStatus = orStatus || k > 0;
    Expect e;
    e.count = items[k].count;
    e.codec = static_cast<cclCodec_t>(codec);
    decodeAny(items[k].in, items[k].inBytes, e, detail::Target{items[k].y, type, accumulate}, status, ws, stream);
  }
  ws.orStatus = orStatus;
}

bool fusesHops(const Params& p) { return isQuantizer(p.codec) && p.fixedLength && !tensorScaled(p.codec); }

void decodeAddEncodeBatch(const Params& p, cclDataType_t type, float divisor, std::span<const HopItem> items,
                          uint32_t* status, Workspace& ws, cudaStream_t stream) {
  if (!fusesHops(p))
    throw Error(cclInvalidArgument, "GPU fused hop: fixed-length quantizer streams without a tensor scale only");
  if (!status) throw Error(cclInvalidArgument, "GPU fused hop: null status word");
  withDeviceType(type, [](auto) {});
  for (const HopItem& it : items) {
    checkEncodeArgs(p, it.local, it.n, it.out, it.outBytes);
    if (!it.in && it.inBytes > 0) throw Error(cclInvalidArgument, "GPU fused hop: null received stream");
  }
  detail::quantizerHopBatch(p, type, divisor, items, status, ws.orStatus, ws, stream);
}

void decode(const void* in, size_t inBytes, const Expect& expect, void* y, cclDataType_t type, uint32_t* status,
            Workspace& ws, cudaStream_t stream) {
  decodeAny(in, inBytes, expect, detail::Target{y, type, false}, status, ws, stream);
}

void decodeAccumulate(const void* in, size_t inBytes, const Expect& expect, float* acc, uint32_t* status, Workspace& ws,
                      cudaStream_t stream) {
  decodeAny(in, inBytes, expect, detail::Target{acc, cclFloat32, true}, status, ws, stream);
}

}  // namespace ccl::codec::cuda
