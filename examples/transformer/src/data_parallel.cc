// SPDX-License-Identifier: BSD-3-Clause
#include "data_parallel.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpt {

namespace {
// Feedback keys of the blocks' all-reduces, above any bucket's.
constexpr int kBlockTensorBase = 1 << 20;
}  // namespace

ZeroShard zeroShard(size_t count, size_t ranks, size_t rank) {
  const size_t length = (count + ranks - 1) / ranks, begin = length * rank;
  return {begin, std::max(begin, std::min(begin + length, count)), length};
}

DataParallel::DataParallel(Comm& comm, const TrainOptions& o, Model<float>& m)
    : comm_(comm),
      zero_(o.zero && comm.size(Group::kDp) > 1),
      lowRank_(o.codecs[static_cast<size_t>(Site::kDpGrad)].compression.codec == cclCodecPowerSgd),
      fused_(o.fuseEmbeddingSync && comm.has(Group::kEmb)),
      model_(m) {
  const size_t P = shardCount(m.layout);
  const ZeroShard z =
      zero_ ? zeroShard(P, static_cast<size_t>(comm.size(Group::kDp)), static_cast<size_t>(comm.rank(Group::kDp)))
            : ZeroShard{0, P, P};
  padded_ = zero_ ? z.length * static_cast<size_t>(comm.size(Group::kDp)) : P;
  shard_ = z.length;
  begin_ = z.begin;
  end_ = z.end;
  m.params.resize(padded_, 0.0f);
  m.grads.resize(padded_, 0.0f);
  rebind(m);
  bucket_ = std::max<size_t>(1, o.bucketBytes / sizeof(float));
  // wte is the first tensor of every layout that holds it.
  if (fused_) skip_ = static_cast<size_t>(m.config.vocab) * static_cast<size_t>(m.config.channels);
  overlap_ = o.overlapDp && comm.size(Group::kDp) > 1;
  if (!overlap_) return;
  // A block's tensors are consecutive in the flat buffer: one range per block.
  firstLayer_ = m.shard.firstLayer;
  const size_t blocks = static_cast<size_t>(m.shard.endLayer - m.shard.firstLayer);
  blocks_.assign(blocks, {SIZE_MAX, 0});
  std::vector<size_t> held(blocks, 0);
  for (const TensorInfo& t : m.layout) {
    if (t.layer < firstLayer_ || t.layer >= m.shard.endLayer) continue;
    auto& [lo, hi] = blocks_[static_cast<size_t>(t.layer - firstLayer_)];
    lo = std::min(lo, t.offset);
    hi = std::max(hi, t.offset + t.size());
    held[static_cast<size_t>(t.layer - firstLayer_)] += t.size();
  }
  for (size_t b = 0; b < blocks; ++b)
    if (blocks_[b].second - blocks_[b].first != held[b])
      throw std::logic_error("--overlap-dp: block " + std::to_string(b) + "'s tensors are not consecutive");
  launched_.assign(blocks, 0);
}

DataParallel::~DataParallel() {
  // cclCommAbort returns once the communicator's queued calls have ended.
  if (comm_.pending(Site::kDpGrad)) comm_.abort();
}

void DataParallel::enqueue(size_t begin, size_t end, int tensor, int layer) {
  // Feedback is keyed by tensor: blocks and the buckets of the rest never share a key.
  comm_.allReduceAsync(Site::kDpGrad, tensor, model_.grads.data() + begin, end - begin, cclAvg, layer);
}

void DataParallel::blockReady(int layer) {
  if (!overlap_) return;
  const size_t b = static_cast<size_t>(layer - firstLayer_);
  if (b >= blocks_.size() || launched_[b]) return;
  launched_[b] = 1;
  enqueue(blocks_[b].first, blocks_[b].second, kBlockTensorBase + layer, layer);
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
  if (overlap_) {
    // What no block covers (embeddings, the final LayerNorm, blocks not yet announced), in
    // buckets, behind the blocks already on their way.
    for (size_t b = 0; b < blocks_.size(); ++b)
      if (!launched_[b]) blockReady(firstLayer_ + static_cast<int>(b));
    size_t off = skip_;
    int k = 0;
    auto rest = [&](size_t end) {
      for (; off < end; off += std::min(bucket_, end - off), ++k) enqueue(off, std::min(off + bucket_, end), k, -1);
    };
    for (const auto& [lo, hi] : blocks_) {
      rest(std::max(off, lo));
      off = std::max(off, hi);
    }
    rest(P);
    comm_.wait(Site::kDpGrad);
    std::fill(launched_.begin(), launched_.end(), 0);
    return;
  }
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
