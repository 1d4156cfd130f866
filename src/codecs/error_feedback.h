// Error feedback state for the collectives. The plain form is codec::encode with a residual
// (e <- (x + e) - decode(encode(x + e))); ResidualFeedback owns that buffer. LocoFeedback is
// LoCo's variant: the error is kept as a moving average e <- beta*e + (1-beta)*err, stored in
// 8 bits (int8 per element, an fp32 absmax scale per block of 128) and cleared every
// `resetInterval` steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/codec.h"

namespace ccl::codec {

class ResidualFeedback {
 public:
  explicit ResidualFeedback(size_t n) : e_(n, 0.0f) {}
  // encode(p, x, type, n, out, outBytes, residual) with this state; n must match.
  size_t encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes);
  void reset();
  const std::vector<float>& error() const { return e_; }

 private:
  std::vector<float> e_;
};

struct LocoOptions {
  float beta = 0.5f;           // weight of the previous error, in [0, 1)
  uint32_t resetInterval = 0;  // clear the error after this many steps; 0: never
};

class LocoFeedback {
 public:
  static constexpr uint32_t kStorageBlock = 128;

  LocoFeedback(size_t n, LocoOptions options);
  // One step: v = x + e, out = encode(v), err = v - decode(out), e <- beta*e + (1-beta)*err.
  size_t encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes);
  void reset();
  uint64_t steps() const { return steps_; }
  // The stored error, dequantised, into e[0, n).
  void error(float* e) const;
  size_t storageBytes() const { return q_.size() + scales_.size() * sizeof(float); }

 private:
  void store(const float* e);

  size_t n_;
  LocoOptions opt_;
  std::vector<int8_t> q_;
  std::vector<float> scales_;
  std::vector<float> work_;
  uint64_t steps_ = 0;
};

}  // namespace ccl::codec
