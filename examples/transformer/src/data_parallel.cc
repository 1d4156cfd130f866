// SPDX-License-Identifier: BSD-3-Clause
#include "data_parallel.h"

#include <algorithm>

namespace gpt {

DataParallel::DataParallel(Comm& comm, const TrainOptions& o, Model<float>& m)
    : comm_(comm),
      zero_(o.zero && comm.size(Group::kDp) > 1),
      lowRank_(o.codecs[static_cast<size_t>(Site::kDpGrad)].compression.codec == cclCodecPowerSgd),
      fused_(o.fuseEmbeddingSync && comm.has(Group::kEmb)),
      model_(m) {
  const size_t P = shardCount(m.layout), n = static_cast<size_t>(comm.size(Group::kDp));
  // ZeRO-1 pads the flat buffers to a multiple of the rank count: shards need no tensor
  // to divide evenly.
  padded_ = zero_ ? (P + n - 1) / n * n : P;
  shard_ = padded_ / n;
  begin_ = zero_ ? shard_ * static_cast<size_t>(comm.rank(Group::kDp)) : 0;
  end_ = zero_ ? std::min(begin_ + shard_, P) : P;
  m.params.resize(padded_, 0.0f);
  m.grads.resize(padded_, 0.0f);
  rebind(m);
  bucket_ = std::max<size_t>(1, o.bucketBytes / sizeof(float));
  // wte is the first tensor of every layout that holds it.
  if (fused_) skip_ = static_cast<size_t>(m.config.vocab) * static_cast<size_t>(m.config.channels);
}

void DataParallel::reduceGradients() {
  float* g = model_.grads.data();
  const size_t P = shardCount(model_.layout);
  if (comm_.size(Group::kDp) == 1) return;
  if (zero_) {
    comm_.reduceScatter(Site::kDpGrad, 0, g, g + begin_, shard_, cclAvg);
    return;
  }
  if (lowRank_ && comm_.compresses(Site::kDpGrad)) return reduceMatrices(g);
  for (size_t off = skip_, k = 0; off < P; off += bucket_, ++k)
    comm_.allReduce(Site::kDpGrad, static_cast<int>(k), g + off, std::min(bucket_, P - off), cclAvg);
}

void DataParallel::reduceMatrices(float* g) {
  vectors_.clear();
  for (size_t k = 0; k < model_.layout.size(); ++k) {
    const TensorInfo& t = model_.layout[k];
    if (t.offset < skip_) continue;
    if (t.rows > 1 && t.cols > 1)
      comm_.allReduce(Site::kDpGrad, static_cast<int>(k) + 1, g + t.offset, t.size(), cclAvg, -1, t.cols);
    else
      vectors_.insert(vectors_.end(), g + t.offset, g + t.offset + t.size());
  }
  // No shape: the low-rank codec leaves this call uncompressed.
  comm_.allReduce(Site::kDpGrad, 0, vectors_.data(), vectors_.size(), cclAvg);
  size_t at = 0;
  for (const TensorInfo& t : model_.layout)
    if (t.offset >= skip_ && !(t.rows > 1 && t.cols > 1)) {
      std::copy(vectors_.begin() + static_cast<std::ptrdiff_t>(at),
                vectors_.begin() + static_cast<std::ptrdiff_t>(at + t.size()), g + t.offset);
      at += t.size();
    }
}

void DataParallel::syncEmbedding() {
  if (!comm_.has(Group::kEmb)) return;
  const size_t n = static_cast<size_t>(model_.config.vocab) * static_cast<size_t>(model_.config.channels);
  float* g = model_.g.wte;
  comm_.allReduce(Site::kEmbSync, 0, g, n, cclSum, -1, static_cast<size_t>(model_.config.channels));
  if (!fused_) return;
  // Summed over both stages and every data-parallel rank: averaged over the latter.
  const float scale = 1.0f / static_cast<float>(comm_.size(Group::kDp));
  for (size_t i = 0; i < n; ++i) g[i] *= scale;
}

void DataParallel::shareParameters() {
  if (!zero_) return;
  float* p = model_.params.data();
  comm_.allGather(Site::kDpParam, 0, p + begin_, p, shard_);
}

std::pair<size_t, size_t> DataParallel::spokenRange(bool sharded) const {
  if (sharded && zero_) return {begin_, end_};
  return comm_.rank(Group::kDp) == 0 ? std::pair<size_t, size_t>{0, shardCount(model_.layout)}
                                     : std::pair<size_t, size_t>{0, 0};
}

}  // namespace gpt
