// The quantiser kinds of codecs/quantizer_kinds.h for the device: how a block's scale is
// chosen and read back and how one element is (de)quantised. The element math is the
// shared code of codecs/math/; only the binding to the wire (raw markers, scale formats),
// whose host versions are not __host__ __device__, is restated here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "codecs/math/quant_fp8.h"
#include "codecs/math/quant_int.h"
#include "codecs/quantizer_kinds.h"
#include "common/floatconv.h"

namespace ccl::codec::cuda {

struct DevScale {
  bool raw;
  float inv;
  float scale;
  uint32_t stored;
};

enum class ScaleRead { kOk, kRaw, kInvalid };

__host__ __device__ inline DevScale devF32Scale(float absmax, float divisor) {
  const float s = absmax / divisor;
  if (absmax > 0.0f && !(s >= math::kMinScale)) return DevScale{true, 0.0f, 0.0f, kF32RawMarker};
  return DevScale{false, s > 0.0f ? 1.0f / s : 0.0f, s, fp::floatBits(s)};
}

__host__ __device__ inline ScaleRead devReadLinearScale(uint32_t stored, bool fp16, float& s) {
  if (fp16) {
    if (stored == kF16RawMarker) return ScaleRead::kRaw;
    s = fp::halfToFloat(static_cast<uint16_t>(stored));
  } else {
    if (stored == kF32RawMarker) return ScaleRead::kRaw;
    s = fp::bitsFloat(stored);
  }
  return (s >= 0.0f && math::isFiniteBits(s)) ? ScaleRead::kOk : ScaleRead::kInvalid;
}

template <int kBitsT>
struct DevIntKind {
  static constexpr int kBits = kBitsT;
  static constexpr int kQmax = IntKind<kBitsT>::kQmax;
  static constexpr uint32_t kMask = IntKind<kBitsT>::kMask;

  __host__ __device__ static DevScale chooseScale(float absmax, bool fp16) {
    if (!fp16) return devF32Scale(absmax, static_cast<float>(kQmax));
    const float s = absmax / static_cast<float>(kQmax);
    if (absmax > 0.0f && !(s >= math::kMinHalfScale && s <= math::kMaxHalfScale))
      return DevScale{true, 0.0f, 0.0f, kF16RawMarker};
    const uint16_t h = math::halfScaleRoundUp(s);
    const float scale = fp::halfToFloat(h);
    return DevScale{false, scale > 0.0f ? 1.0f / scale : 0.0f, scale, h};
  }
  __host__ __device__ static ScaleRead readScale(uint32_t stored, bool fp16, float& s) {
    return devReadLinearScale(stored, fp16, s);
  }
  __host__ __device__ static uint32_t quant(float v, float inv) {
    return static_cast<uint32_t>(math::quantIntNearest(v * inv, kQmax)) & kMask;
  }
  __host__ __device__ static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return static_cast<uint32_t>(math::quantIntStochastic(v * inv, kQmax, r)) & kMask;
  }
  __host__ __device__ static float dequant(uint32_t code, float s) {
    const int32_t q = static_cast<int32_t>(code << (32 - kBits)) >> (32 - kBits);
    return math::dequantInt(q, s);
  }
};

template <class F>
struct DevFp8Kind {
  static constexpr int kBits = 8;
  static constexpr float kMaxFinite = math::fp8MaxFinite<F>();  // evaluated on the host compiler's side

  __host__ __device__ static DevScale chooseScale(float absmax, bool) { return devF32Scale(absmax, kMaxFinite); }
  __host__ __device__ static ScaleRead readScale(uint32_t stored, bool, float& s) {
    return devReadLinearScale(stored, false, s);
  }
  __host__ __device__ static uint32_t quant(float v, float inv) { return math::fp8EncodeFinite<F>(v * inv); }
  __host__ __device__ static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return math::fp8EncodeStochastic<F>(v * inv, r);
  }
  __host__ __device__ static float dequant(uint32_t code, float s) { return math::fp8DecodeFinite<F>(code) * s; }
};

struct DevMxKind {
  static constexpr int kBits = 8;
  static constexpr int kEmaxElem = MxKind::kEmaxElem;

  __host__ __device__ static DevScale chooseScale(float absmax, bool) {
    const uint32_t e = math::mxScaleExponent(absmax, kEmaxElem);
    return DevScale{false, math::mxEncodeMultiplier(e), math::mxScaleValue(e), e};
  }
  __host__ __device__ static ScaleRead readScale(uint32_t stored, bool, float& s) {
    if (stored == math::kMxRawMarker) return ScaleRead::kRaw;
    s = math::mxScaleValue(stored);
    return ScaleRead::kOk;
  }
  __host__ __device__ static uint32_t quant(float v, float inv) { return math::fp8EncodeFinite<fp::E4M3>(v * inv); }
  __host__ __device__ static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return math::fp8EncodeStochastic<fp::E4M3>(v * inv, r);
  }
  __host__ __device__ static float dequant(uint32_t code, float s) { return math::fp8DecodeFinite<fp::E4M3>(code) * s; }
};

// Calls fn(Kind{}) for a quantiser codec; throws for any other.
template <class Fn>
decltype(auto) withDeviceKind(cclCodec_t codec, Fn&& fn) {
  switch (codec) {
    case cclCodecFp8E4m3:
      return fn(DevFp8Kind<fp::E4M3>{});
    case cclCodecFp8E5m2:
      return fn(DevFp8Kind<fp::E5M2>{});
    case cclCodecMxfp8E4m3:
      return fn(DevMxKind{});
    case cclCodecInt8:
      return fn(DevIntKind<8>{});
    case cclCodecInt4:
      return fn(DevIntKind<4>{});
    case cclCodecInt2:
      return fn(DevIntKind<2>{});
    default:
      throw Error(cclInternalError, "not a quantiser codec");
  }
}

__host__ __device__ inline uint32_t rawMarkerOf(int codec, bool fp16Scales) {
  if (codec == cclCodecMxfp8E4m3) return math::kMxRawMarker;
  return fp16Scales ? kF16RawMarker : kF32RawMarker;
}

}  // namespace ccl::codec::cuda
