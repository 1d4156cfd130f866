// SPDX-License-Identifier: BSD-3-Clause
// The data-parallel part of a step over a rank's shard: gradients averaged over its
// data-parallel group (all-reduce in buckets, or ZeRO-1's reduce-scatter), wte's gradient
// summed between the first and last pipeline stage, and with ZeRO-1 the all-gather of the
// updated parameters.
//
// Two of Optimus-CC's techniques live here: with a low-rank codec on dp.grad (powersgd)
// every weight matrix is all-reduced on its own, with its shape and its own feedback state
// (vectors go together, uncompressed), on the stages the site's codec names; with the fused
// embedding synchronisation the first and last stages leave wte out of their data-parallel
// all-reduce and one collective over both stages and every data-parallel rank sums it.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "comm.h"
#include "model.h"
#include "train.h"

namespace gpt {

// ZeRO-1's shard of data-parallel rank `rank` of `ranks` in a buffer of `count` elements: the
// buffer is padded to a multiple of `ranks` (shards need no tensor to divide evenly), every
// shard `length` long; [begin, end) holds real elements (end < begin + length in the last).
struct ZeroShard {
  size_t begin, end, length;
};
ZeroShard zeroShard(size_t count, size_t ranks, size_t rank);

class DataParallel {
 public:
  // Pads the model's buffers for ZeRO-1 (a multiple of the rank count) and rebinds them.
  DataParallel(Comm& comm, const TrainOptions& o, Model<float>& m);
  // A step that failed between blockReady and reduceGradients (an exception in the backward,
  // a lost rank) leaves blocks' all-reduces queued on a host stream, in place on the model's
  // gradients, which are freed right after this (Run holds the model first): they must end
  // here, and a peer may never join them. So the communicators are aborted, as the failure
  // does next anyway: the queued calls fail, a running one as soon as it notices, and the
  // peers fail instead of waiting for this rank.
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  size_t begin() const { return begin_; }  // this rank's AdamW range
  size_t end() const { return end_; }
  bool zero() const { return zero_; }

  // Averages the gradients over the data-parallel group. With overlap (--overlap-dp) the
  // blocks blockReady announced are already on their way: the rest is enqueued the same way,
  // then everything is waited for.
  void reduceGradients();
  // --overlap-dp: block `layer`'s gradient is final (the step's last backward has passed
  // it): its all-reduce starts now, on a host stream, while the backward goes on.
  void blockReady(int layer);
  bool overlaps() const { return overlap_; }
  // The tied embedding: first and last stage add each other's gradient of wte (with the
  // fused synchronisation, every data-parallel rank's too, averaged over them).
  void syncEmbedding();
  // After this rank's update: every rank gets every shard.
  void shareParameters();

  // The range of the local buffer whose values this rank speaks for in its data-parallel
  // group: its shard with ZeRO-1 (`sharded`), else everything on the group's rank 0 (the
  // others hold copies).
  std::pair<size_t, size_t> spokenRange(bool sharded) const;

 private:
  void reduceMatrices(float* g);
  void enqueue(size_t begin, size_t end, int tensor, int layer);

  Comm& comm_;
  bool zero_;
  bool lowRank_;  // dp.grad's codec is low-rank: per-matrix all-reduces
  bool fused_;    // wte's gradient goes through the fused embedding synchronisation
  Model<float>& model_;
  size_t padded_ = 0, shard_ = 0, begin_ = 0, end_ = 0, bucket_ = 0;
  size_t skip_ = 0;  // elements at the buffer's start the fused synchronisation reduces instead
  std::vector<float> vectors_;
  bool overlap_ = false;
  // Per block of this shard (index layer - firstLayer): its range in the flat buffer, and
  // whether its all-reduce was enqueued this step.
  std::vector<std::pair<size_t, size_t>> blocks_;
  std::vector<char> launched_;
  int firstLayer_ = 0;
};

}  // namespace gpt
