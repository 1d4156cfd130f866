// SPDX-License-Identifier: BSD-3-Clause
// Bian et al.'s learned linear autoencoder on the tensor-parallel sums: at each row-parallel
// layer of the blocks it covers, every rank encodes its partial output y_t (rows x C) into
// codes y_t E^T (rows x c), the group sums the codes (c/C of the bytes), and every rank
// decodes the sum, (sum_t y_t E^T) D^T. The encoder being linear, summing the codes is
// encoding the sum. E (c x C) and D (C x c) are trained with the model: the backward is the
// exact gradient of this path (dD = dy^T codes, dcodes = dy D, dE_t = dcodes^T y_t, dy_t =
// dcodes E), with dE summed over the group and both averaged over data-parallel ranks. They
// start as E with orthonormal rows (from the seed, the same on every rank) and D = E^T, and
// have their own AdamW with the model's settings and learning rate. Not in checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model.h"
#include "optimizer.h"

namespace gpt {

class Autoencoder {
 public:
  // Codes of `dim` values per row for blocks [firstLayer, endLayer) of the model, both halves.
  Autoencoder(const ModelConfig& c, int dim, int firstLayer, int endLayer, uint64_t seed, const AdamWConfig& adamw);

  bool covers(int layer) const { return layer >= first_ && layer < end_; }
  int dim() const { return dim_; }

  // The codes of this rank's partial output (rows x C), to be summed over the group in place;
  // the partial is kept for the backward of (slot, layer, h).
  float* encode(int slot, int layer, BlockHalf h, const float* partial, size_t rows);
  // out (rows x C) = the summed codes of (slot, layer, h) times D^T.
  void decode(int slot, int layer, BlockHalf h, float* out, size_t rows);
  // The gradient of this rank's partial from the gradient of the decoded sum (rows x C);
  // accumulates dE (this rank's share) and dD.
  const float* backward(int slot, int layer, BlockHalf h, const float* dout, size_t rows);

  void zeroGrads();
  // The encoders' gradients (to sum over the tensor-parallel group) and all gradients (to
  // average over the data-parallel group).
  float* encoderGrads() { return grads_.data(); }
  size_t encoderCount() const { return encoders_; }
  float* grads() { return grads_.data(); }
  float* params() { return params_.data(); }  // [all E][all D], each E dim x C, each D C x dim
  size_t count() const { return params_.size(); }
  void update(float lr);

 private:
  struct Slot {
    std::vector<float> partial, codes;
  };
  Slot& keep(int slot, int layer, BlockHalf h);
  float* E(int layer, BlockHalf h) { return params_.data() + index(layer, h) * matrix_; }
  float* D(int layer, BlockHalf h) { return params_.data() + encoders_ + index(layer, h) * matrix_; }
  float* dE(int layer, BlockHalf h) { return grads_.data() + index(layer, h) * matrix_; }
  float* dD(int layer, BlockHalf h) { return grads_.data() + encoders_ + index(layer, h) * matrix_; }
  size_t index(int layer, BlockHalf h) const {
    return static_cast<size_t>(layer - first_) * 2 + static_cast<size_t>(h);
  }

  int channels_, dim_, first_, end_;
  size_t matrix_ = 0;    // dim x C
  size_t encoders_ = 0;  // the encoders' values: [all E][all D]
  std::vector<float> params_, grads_;
  AdamW opt_;
  std::vector<Slot> kept_;  // per (slot, layer, half)
  std::vector<float> dcodes_, dpartial_;
};

}  // namespace gpt
