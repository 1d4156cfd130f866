// SPDX-License-Identifier: BSD-3-Clause
#include "autoencoder.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "ops.h"
#include "rng.h"

namespace gpt {

Autoencoder::Autoencoder(const ModelConfig& c, int dim, int firstLayer, int endLayer, uint64_t seed,
                         const AdamWConfig& adamw)
    : channels_(c.channels), dim_(dim), first_(firstLayer), end_(std::max(firstLayer, endLayer)) {
  if (dim < 1 || dim > c.channels)
    throw std::invalid_argument("--autoencoder " + std::to_string(dim) + ": the code width must be in [1, " +
                                std::to_string(c.channels) + "]");
  const size_t C = static_cast<size_t>(channels_), halves = static_cast<size_t>(end_ - first_) * 2;
  matrix_ = static_cast<size_t>(dim_) * C;
  encoders_ = halves * matrix_;
  params_.assign(2 * encoders_, 0.0f);
  grads_.assign(2 * encoders_, 0.0f);
  // Orthonormal rows by Gram-Schmidt on normal draws: the autoencoder starts as the
  // projection onto a random dim-dimensional subspace.
  Rng rng(seed ^ 0xae0000ull);
  for (size_t k = 0; k < halves; ++k) {
    float* e = params_.data() + k * matrix_;
    for (size_t i = 0; i < matrix_; ++i) e[i] = rng.normal();
    for (int r = 0; r < dim_; ++r) {
      float* row = e + static_cast<size_t>(r) * C;
      for (int q = 0; q < r; ++q) {
        const float* prev = e + static_cast<size_t>(q) * C;
        double dot = 0;
        for (size_t j = 0; j < C; ++j) dot += static_cast<double>(row[j]) * prev[j];
        for (size_t j = 0; j < C; ++j) row[j] -= static_cast<float>(dot) * prev[j];
      }
      double norm = 0;
      for (size_t j = 0; j < C; ++j) norm += static_cast<double>(row[j]) * row[j];
      for (size_t j = 0; j < C; ++j) row[j] = static_cast<float>(row[j] / std::sqrt(norm));
    }
    float* d = params_.data() + encoders_ + k * matrix_;  // D (C x dim) = E^T
    for (int r = 0; r < dim_; ++r)
      for (size_t j = 0; j < C; ++j) d[j * static_cast<size_t>(dim_) + static_cast<size_t>(r)] = e[r * C + j];
  }
  std::vector<TensorInfo> layout;
  for (size_t k = 0; k < 2 * halves; ++k)
    layout.push_back({"autoencoder", -1, k < halves ? static_cast<size_t>(dim_) : C,
                      k < halves ? C : static_cast<size_t>(dim_), k * matrix_, true});
  opt_ = makeAdamW(adamw, layout, 0, params_.size());
}

Autoencoder::Slot& Autoencoder::keep(int slot, int layer, BlockHalf h) {
  const size_t i =
      (static_cast<size_t>(slot) * static_cast<size_t>(end_ - first_) + static_cast<size_t>(layer - first_)) * 2 +
      static_cast<size_t>(h);
  if (kept_.size() <= i) kept_.resize(i + 1);
  return kept_[i];
}

float* Autoencoder::encode(int slot, int layer, BlockHalf h, const float* partial, size_t rows) {
  Slot& s = keep(slot, layer, h);
  const size_t C = static_cast<size_t>(channels_);
  s.partial.assign(partial, partial + rows * C);
  s.codes.resize(rows * static_cast<size_t>(dim_));
  ops::matmulForward(s.codes.data(), partial, E(layer, h), static_cast<const float*>(nullptr), static_cast<int>(rows),
                     channels_, dim_);
  return s.codes.data();
}

void Autoencoder::decode(int slot, int layer, BlockHalf h, float* out, size_t rows) {
  Slot& s = keep(slot, layer, h);
  ops::matmulForward(out, s.codes.data(), D(layer, h), static_cast<const float*>(nullptr), static_cast<int>(rows), dim_,
                     channels_);
}

const float* Autoencoder::backward(int slot, int layer, BlockHalf h, const float* dout, size_t rows) {
  Slot& s = keep(slot, layer, h);
  dcodes_.resize(rows * static_cast<size_t>(dim_));
  dpartial_.resize(rows * static_cast<size_t>(channels_));
  const int R = static_cast<int>(rows);
  // dcodes = dout D, dD += dout^T codes; then dpartial = dcodes E, dE += dcodes^T partial.
  ops::matmulBackward(dcodes_.data(), dD(layer, h), static_cast<float*>(nullptr), dout, s.codes.data(), D(layer, h), R,
                      dim_, channels_);
  ops::matmulBackward(dpartial_.data(), dE(layer, h), static_cast<float*>(nullptr), dcodes_.data(), s.partial.data(),
                      E(layer, h), R, channels_, dim_);
  return dpartial_.data();
}

void Autoencoder::zeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void Autoencoder::update(float lr) { adamwStep(opt_, params_.data(), grads_.data(), lr, 1.0f); }

}  // namespace gpt
