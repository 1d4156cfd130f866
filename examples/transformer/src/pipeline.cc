// SPDX-License-Identifier: BSD-3-Clause
#include "pipeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace gpt {

Pipeline::Pipeline(Model<float>& m, Comm& comm, PipeSchedule kind, int microbatches, int seq, Timeline* timeline,
                   LocalHead* localHead, std::vector<int> sliceBounds)
    : model_(m),
      comm_(comm),
      timeline_(timeline),
      stage_(m.shard.stage),
      seq_(seq),
      bounds_(sliceBounds.empty() ? std::vector<int>{0, seq} : std::move(sliceBounds)),
      slices_(static_cast<int>(bounds_.size()) - 1),
      schedules_(pipelineSchedules(kind, m.shard.pp, microbatches, slices_)),
      // A micro-batch's slices share its activations: one slot per micro-batch.
      slots_(slices_ > 1 ? microbatches : activationSlots(schedules_[static_cast<size_t>(m.shard.stage)])),
      kind_(kind),
      localHead_(localHead) {
  if (localUpdates(kind) && !localHead_ && hostsLocalHead(kind, m.shard))
    throw std::logic_error("pipeline: local updates need this stage's local head");
  if (bounds_.front() != 0 || bounds_.back() != seq ||
      std::adjacent_find(bounds_.begin(), bounds_.end(), std::greater_equal<int>()) != bounds_.end())
    throw std::invalid_argument("token slices must cut [0, --seq) into non-empty pieces in order");
  model_.slicing = slices_ > 1;
}

void Pipeline::window(int unit) {
  if (slices_ == 1) return;
  const int sl = unit % slices_;
  model_.sliceBegin = bounds_[static_cast<size_t>(sl)];
  model_.sliceEnd = bounds_[static_cast<size_t>(sl) + 1];
}

SliceTimes measureSliceTimes(Model<float>& m, int seq, int granularity, int repeats) {
  const bool wasSlicing = m.slicing;
  const auto opSeconds = m.opSeconds;
  m.slicing = true;
  prepare(m, 1, seq, 1);
  const std::vector<int> tokens(static_cast<size_t>(seq), 0);
  SliceTimes t{seq, granularity, {}};
  const int n = t.points();
  t.table.assign(static_cast<size_t>(n) * static_cast<size_t>(n), 0.0);
  for (int r = 0; r < repeats; ++r)
    for (int i = 0; i < n - 1; ++i)
      for (int j = i + 1; j < n; ++j) {
        m.sliceBegin = t.position(i);
        m.sliceEnd = t.position(j);
        const double t0 = Timeline::now();
        if (m.shard.embedding()) embedForward(m, 0, tokens.data());
        for (int l = m.shard.firstLayer; l < m.shard.endLayer; ++l) blockForward(m, 0, l);
        if (m.shard.head()) {
          headForward(m, 0, tokens.data());
          headBackward(m, 0, tokens.data(), 1.0f);
        }
        for (int l = m.shard.endLayer - 1; l >= m.shard.firstLayer; --l) blockBackward(m, 0, l);
        if (m.shard.embedding()) embedBackward(m, 0, tokens.data());
        const double dt = Timeline::now() - t0;
        double& cell = t.table[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)];
        cell = r == 0 ? dt : std::min(cell, dt);
      }
  m.sliceEnd = -1;
  m.slicing = wasSlicing;
  zeroGrads(m);
  m.opSeconds = opSeconds;
  return t;
}

bool hostsLocalHead(PipeSchedule kind, const Shard& s) {
  if (kind == PipeSchedule::kLocal) return !s.head();
  if (kind == PipeSchedule::kLocalOverlap) return s.stage > 0;
  return false;
}

int Pipeline::acquire(int mb) {
  int& slot = slotOf_[static_cast<size_t>(mb)];
  if (slot >= 0) return slot;
  if (free_.empty()) throw std::logic_error("pipeline: more micro-batches in flight than activation slots");
  slot = free_.back();
  free_.pop_back();
  return slot;
}

void Pipeline::compute(const Action& a, const Batch& b, float lossScale, double& loss) {
  Model<float>& m = model_;
  const double t0 = Timeline::now();
  const int mb = a.microbatch / slices_;  // the unit's micro-batch (its slice sets the window)
  window(a.microbatch);
  if (a.kind == Action::kForward) {
    const int slot = acquire(mb);
    if (m.shard.embedding()) embedForward(m, slot, b.tokens.data());
    for (int l = m.shard.firstLayer; l < m.shard.endLayer; ++l) blockForward(m, slot, l);
    if (m.shard.head()) loss += headForward(m, slot, b.targets.data());
  } else if (a.kind == Action::kLocalBackward) {
    // The previous stage's local head, after this stage's first block: its gradient goes
    // back through that block only, and on to the previous stage (scratch.dresidual).
    const int slot = slotOf_[static_cast<size_t>(mb)];
    const int first = m.shard.firstLayer;
    localLoss_ += localHead_->lossAndBackward(
        m.acts[static_cast<size_t>(slot)].layers[static_cast<size_t>(first)].out.data(), m.heldRows(), m.rows(),
        b.targets.data() + m.heldRowBegin(), lossScale, m.scratch.dresidual.data());
    blockBackward(m, slot, first);
  } else {
    const int slot = slotOf_[static_cast<size_t>(mb)];
    if (slot < 0) throw std::logic_error("pipeline: a backward before its forward");
    if (m.shard.head()) {
      headBackward(m, slot, b.targets.data(), lossScale);
    } else if (kind_ == PipeSchedule::kLocal) {
      // Chunked local updates: the stage's own local head, at its end.
      localLoss_ +=
          localHead_->lossAndBackward(stageOutput(m, slot), m.heldRows(), m.rows(), b.targets.data() + m.heldRowBegin(),
                                      lossScale, m.scratch.dresidual.data());
    } else {
      // The received gradient of the unit's rows, to the start of dresidual.
      const std::vector<float>& g = gradIn_[static_cast<size_t>(slot)];
      const auto first = g.begin() + static_cast<std::ptrdiff_t>(unitOffset(a.microbatch));
      std::copy(first, first + static_cast<std::ptrdiff_t>(unitCount(a.microbatch)), m.scratch.dresidual.begin());
    }
    const bool last = running_ == lastBackward_ && blockDone_;
    for (int l = m.shard.endLayer - 1; l >= m.shard.firstLayer; --l) {
      blockBackward(m, slot, l);
      if (last) blockDone_(l);
    }
    // With local updates the gradient stops at the stage's input.
    if (m.shard.embedding()) embedBackward(m, slot, b.tokens.data());
    // The last backward of a micro-batch is its first slice's.
    if (a.microbatch % slices_ == 0) {
      free_.push_back(slot);
      slotOf_[static_cast<size_t>(mb)] = -1;
    }
  }
  if (timeline_)
    timeline_->add({t0, Timeline::now(), a.kind == Action::kForward ? SpanKind::kForward : SpanKind::kBackward, -1,
                    a.microbatch, -1, 0, static_cast<int32_t>(a.phase)});
}

size_t Pipeline::unitOffset(int unit) const {
  if (slices_ == 1) return 0;  // a rank's buffers hold its rows only (sequence parallel: a share)
  return static_cast<size_t>(bounds_[static_cast<size_t>(unit % slices_)]) *
         static_cast<size_t>(model_.config.channels);
}

size_t Pipeline::unitCount(int unit) const {
  const size_t rows = slices_ == 1 ? static_cast<size_t>(model_.heldRows())
                                   : static_cast<size_t>(bounds_[static_cast<size_t>(unit % slices_) + 1] -
                                                         bounds_[static_cast<size_t>(unit % slices_)]);
  return rows * static_cast<size_t>(model_.config.channels);
}

void Pipeline::transfer(const Action& a) {
  Model<float>& m = model_;
  const size_t C = static_cast<size_t>(m.config.channels);
  std::vector<PeerTransfer> group;
  for (const Transfer& t : a.transfers) {
    const int mb = t.microbatch / slices_;
    // A unit's rows: the micro-batch's (the held ones), or a slice of them.
    const size_t count = unitCount(t.microbatch), at = unitOffset(t.microbatch);
    PeerTransfer p{t.send(), Site::kPpFwd, t.peer(stage_), nullptr, count, t.microbatch, static_cast<int>(t.phase), C};
    switch (t.kind) {
      case Transfer::kSendActivation:
        p.buf = const_cast<float*>(stageOutput(m, slotOf_[static_cast<size_t>(mb)])) + at;
        break;
      case Transfer::kRecvActivation:
        p.buf = m.acts[static_cast<size_t>(acquire(mb))].input.data() + at;
        break;
      case Transfer::kSendGradient:
        p.site = Site::kPpBwd;
        p.buf = m.scratch.dresidual.data();
        break;
      case Transfer::kRecvGradient:
        p.site = Site::kPpBwd;
        p.buf = gradIn_[static_cast<size_t>(slotOf_[static_cast<size_t>(mb)])].data() + at;
        break;
    }
    group.push_back(p);
  }
  comm_.exchange(group);
}

double Pipeline::step(const std::vector<Batch>& batches, float lossScale) {
  Model<float>& m = model_;
  if (batches.empty()) throw std::invalid_argument("pipeline: no micro-batches");
  const int B = static_cast<int>(batches[0].tokens.size()) / seq_;
  prepare(m, B, seq_, slots_);
  gradIn_.resize(static_cast<size_t>(slots_));
  for (std::vector<float>& g : gradIn_) g.resize(m.scratch.dresidual.size());
  slotOf_.assign(batches.size(), -1);
  free_.clear();
  for (int s = slots_ - 1; s >= 0; --s) free_.push_back(s);
  double loss = 0;
  localLoss_ = 0;
  lastBackward_ = SIZE_MAX;
  for (size_t i = 0; i < actions().size(); ++i)
    if (actions()[i].kind == Action::kBackward) lastBackward_ = i;
  for (running_ = 0; running_ < actions().size(); ++running_) {
    const Action& a = actions()[running_];
    if (a.kind == Action::kTransfer)
      transfer(a);
    else
      compute(a, batches[static_cast<size_t>(a.microbatch / slices_)], lossScale, loss);
  }
  m.sliceEnd = -1;  // validation and sampling see whole sequences
  return loss;
}

double Pipeline::evaluate(const Batch& b, int sequences) {
  Model<float>& m = model_;
  prepare(m, sequences, seq_, std::max(slots_, 1));
  const size_t C = static_cast<size_t>(m.config.channels), count = static_cast<size_t>(m.heldRows()) * C;
  if (m.shard.embedding())
    embedForward(m, 0, b.tokens.data());
  else
    comm_.exchange({{false, Site::kPpFwd, stage_ - 1, m.acts[0].input.data(), count, -1, -1, C}});
  for (int l = m.shard.firstLayer; l < m.shard.endLayer; ++l) blockForward(m, 0, l);
  if (!m.shard.head()) {
    comm_.exchange({{true, Site::kPpFwd, stage_ + 1, const_cast<float*>(stageOutput(m, 0)), count, -1, -1, C}});
    return 0;
  }
  return headForward(m, 0, b.targets.data());
}

BubbleReport pipelineBubble(const std::vector<std::vector<Span>>& spansOfStage,
                            const std::vector<std::vector<Action>>& schedules, int step) {
  BubbleReport r;
  r.stages = static_cast<int>(schedules.size());
  r.step = step;
  for (const Action& a : schedules.front())
    if (a.kind == Action::kForward) ++r.microbatches;
  r.theory = static_cast<double>(r.stages - 1) / static_cast<double>(r.microbatches + r.stages - 1);
  // Measured durations by (stage, forward?, micro-batch).
  std::map<std::tuple<int, bool, int>, double> took;
  double first = std::numeric_limits<double>::infinity(), last = -first, busy = 0;
  for (int s = 0; s < r.stages; ++s)
    for (const Span& sp : spansOfStage[static_cast<size_t>(s)]) {
      if (sp.step != step || (sp.kind != SpanKind::kForward && sp.kind != SpanKind::kBackward)) continue;
      took[{s, sp.kind == SpanKind::kForward, sp.microbatch}] = sp.end - sp.start;
      busy += sp.end - sp.start;
      first = std::min(first, sp.start);
      last = std::max(last, sp.end);
    }
  if (took.empty())
    throw std::invalid_argument("pipelineBubble: no computation traced in step " + std::to_string(step));
  r.sectionSeconds = last - first;
  r.measured = 1.0 - busy / (r.stages * r.sectionSeconds);
  const std::vector<double> finish = simulatePipeline(schedules, [&](int s, const Action& a) {
    const auto it = took.find({s, a.kind == Action::kForward, a.microbatch});
    if (it == took.end()) throw std::invalid_argument("pipelineBubble: a computation of the schedule was not traced");
    return it->second;
  });
  r.replayed = 1.0 - busy / (r.stages * *std::max_element(finish.begin(), finish.end()));
  return r;
}

}  // namespace gpt
