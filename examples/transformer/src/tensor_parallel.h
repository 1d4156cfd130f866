// SPDX-License-Identifier: BSD-3-Clause
// A tensor-parallel group's points (model.h's TensorParallel) as collectives of the tp.fwd
// and tp.bwd sites: all-reduce, or with sequence parallelism reduce-scatter and all-gather.
// Feedback state, when a site has a codec, is kept per (block, half, point). With an
// autoencoder (autoencoder.h) the forward sums of the blocks it covers carry its codes.
#pragma once

#include <cstddef>

#include "autoencoder.h"
#include "comm.h"
#include "model.h"

namespace gpt {

class TensorParallelComm final : public TensorParallel<float> {
 public:
  // `autoencoder` may be null (the sums are plain or carry the site's codec).
  TensorParallelComm(Comm& comm, bool sequenceParallel, int channels, Autoencoder* autoencoder);

  void forwardGather(int slot, int layer, BlockHalf h, const float* held, float* all, size_t heldCount) override;
  void forwardReduce(int slot, int layer, BlockHalf h, float* partial, float* out, size_t heldCount) override;
  const float* reduceGradient(int slot, int layer, BlockHalf h, const float* dout, size_t rows, size_t cols) override;
  void backwardGather(int slot, int layer, BlockHalf h, const float* held, float* all, size_t heldCount) override;
  void backwardReduce(int slot, int layer, BlockHalf h, float* partial, float* out, size_t heldCount) override;

  // After a step's backward: the autoencoder's encoder gradients summed over the group
  // (tp.grad), then all its gradients averaged over the data-parallel group (dp.grad).
  void reduceAutoencoderGradients();

 private:
  static int tensor(int layer, BlockHalf h, int point) { return layer * 4 + static_cast<int>(h) * 2 + point; }
  void reduce(Site s, int tensor, int layer, float* partial, float* out, size_t heldCount);

  Comm& comm_;
  bool sp_;
  size_t channels_;  // the activations' row length
  Autoencoder* autoencoder_;
};

}  // namespace gpt
