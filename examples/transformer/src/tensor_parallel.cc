// SPDX-License-Identifier: BSD-3-Clause
#include "tensor_parallel.h"

namespace gpt {

TensorParallelComm::TensorParallelComm(Comm& comm, bool sequenceParallel, int channels, Autoencoder* autoencoder)
    : comm_(comm), sp_(sequenceParallel), channels_(static_cast<size_t>(channels)), autoencoder_(autoencoder) {}

void TensorParallelComm::forwardGather(int, int layer, BlockHalf h, const float* held, float* all, size_t heldCount) {
  comm_.allGather(Site::kTpFwd, tensor(layer, h, 0), held, all, heldCount, layer);
}

void TensorParallelComm::forwardReduce(int slot, int layer, BlockHalf h, float* partial, float* out, size_t heldCount) {
  if (autoencoder_ && autoencoder_->covers(layer)) {
    // The codes are summed in place of the outputs: they stand for channels / dim times more.
    const size_t rows = heldCount / channels_, dim = static_cast<size_t>(autoencoder_->dim());
    float* codes = autoencoder_->encode(slot, layer, h, partial, rows);
    comm_.allReduce(Site::kTpFwd, tensor(layer, h, 1), codes, rows * dim, cclSum, layer, 0,
                    static_cast<double>(channels_) / static_cast<double>(dim));
    autoencoder_->decode(slot, layer, h, out, rows);
    return;
  }
  reduce(Site::kTpFwd, tensor(layer, h, 1), layer, partial, out, heldCount);
}

const float* TensorParallelComm::reduceGradient(int slot, int layer, BlockHalf h, const float* dout, size_t rows,
                                                size_t) {
  if (autoencoder_ && autoencoder_->covers(layer)) return autoencoder_->backward(slot, layer, h, dout, rows);
  return dout;  // the gradient of a sum is every part's
}

void TensorParallelComm::backwardGather(int, int layer, BlockHalf h, const float* held, float* all, size_t heldCount) {
  comm_.allGather(Site::kTpBwd, tensor(layer, h, 0), held, all, heldCount, layer);
}

void TensorParallelComm::backwardReduce(int, int layer, BlockHalf h, float* partial, float* out, size_t heldCount) {
  reduce(Site::kTpBwd, tensor(layer, h, 1), layer, partial, out, heldCount);
}

void TensorParallelComm::reduce(Site s, int tensor, int layer, float* partial, float* out, size_t heldCount) {
  if (sp_)
    comm_.reduceScatter(s, tensor, partial, out, heldCount, cclSum, layer);
  else
    comm_.allReduce(s, tensor, partial, heldCount, cclSum, layer, channels_);
}

void TensorParallelComm::reduceAutoencoderGradients() {
  if (!autoencoder_ || autoencoder_->count() == 0) return;
  comm_.allReduce(Site::kTpGrad, 1, autoencoder_->encoderGrads(), autoencoder_->encoderCount(), cclSum);
  if (comm_.size(Group::kDp) > 1)
    comm_.allReduce(Site::kDpGrad, -1, autoencoder_->grads(), autoencoder_->count(), cclAvg);
}

}  // namespace gpt
