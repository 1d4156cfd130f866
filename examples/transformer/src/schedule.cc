// SPDX-License-Identifier: BSD-3-Clause
#include "schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

namespace gpt {

const char* scheduleName(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::kGPipe:
      return "gpipe";
    case PipeSchedule::k1F1B:
      return "1f1b";
    case PipeSchedule::kLocal:
      return "local";
    case PipeSchedule::kLocalOverlap:
      return "local-overlap";
  }
  return "?";
}

bool scheduleFromName(const std::string& name, PipeSchedule* out) {
  for (PipeSchedule s : {PipeSchedule::kGPipe, PipeSchedule::k1F1B, PipeSchedule::kLocal, PipeSchedule::kLocalOverlap})
    if (name == scheduleName(s)) {
      *out = s;
      return true;
    }
  return false;
}

const char* phaseName(Phase p) {
  switch (p) {
    case Phase::kWarmup:
      return "warmup";
    case Phase::kSteady:
      return "steady";
    case Phase::kCooldown:
      return "cooldown";
  }
  return "?";
}

namespace {

// Appends one stage's actions; transfers are tagged with a provisional phase that
// pipelineSchedules replaces by the producer's.
class Builder {
 public:
  Builder(int stages, int stage) : first_(stage == 0), last_(stage == stages - 1) {}

  void forward(int mb, Phase ph) { out.push_back({Action::kForward, mb, ph, {}}); }
  void backward(int mb, Phase ph) { out.push_back({Action::kBackward, mb, ph, {}}); }
  void localBackward(int mb, Phase ph) { out.push_back({Action::kLocalBackward, mb, ph, {}}); }
  // A group of the transfers that apply at this stage (the first stage receives no
  // activations, the last sends none); nothing when none applies.
  void transfers(std::vector<Transfer> ts) {
    std::erase_if(ts, [&](const Transfer& t) {
      const bool towardsNext = t.kind == Transfer::kSendActivation || t.kind == Transfer::kRecvGradient;
      return towardsNext ? last_ : first_;
    });
    if (!ts.empty()) out.push_back({Action::kTransfer, -1, Phase::kSteady, std::move(ts)});
  }
  static Transfer t(Transfer::Kind k, int mb) { return {k, mb, Phase::kSteady}; }

  std::vector<Action> out;

 private:
  bool first_, last_;
};

std::vector<Action> gpipe(int stages, int stage, int m, int slices) {
  Builder b(stages, stage);
  for (int i = 0; i < m * slices; ++i) {
    b.transfers({Builder::t(Transfer::kRecvActivation, i)});
    b.forward(i, Phase::kWarmup);
    b.transfers({Builder::t(Transfer::kSendActivation, i)});
  }
  for (int mb = 0; mb < m; ++mb)
    for (int sl = slices - 1; sl >= 0; --sl) {
      const int i = mb * slices + sl;
      b.transfers({Builder::t(Transfer::kRecvGradient, i)});
      b.backward(i, Phase::kCooldown);
      b.transfers({Builder::t(Transfer::kSendGradient, i)});
    }
  return b.out;
}

// Megatron's non-interleaved 1F1B: a send and the receive it waits on share a group, so no
// two stages each wait for the other to receive.
std::vector<Action> oneForwardOneBackward(int stages, int stage, int m) {
  Builder b(stages, stage);
  const int warm = std::min(stages - stage - 1, m), steady = m - warm;
  for (int i = 0; i < warm; ++i) {
    b.transfers({Builder::t(Transfer::kRecvActivation, i)});
    b.forward(i, Phase::kWarmup);
    b.transfers({Builder::t(Transfer::kSendActivation, i)});
  }
  if (steady > 0) b.transfers({Builder::t(Transfer::kRecvActivation, warm)});
  for (int j = 0; j < steady; ++j) {
    const int f = warm + j;
    b.forward(f, Phase::kSteady);
    b.transfers({Builder::t(Transfer::kSendActivation, f), Builder::t(Transfer::kRecvGradient, j)});
    b.backward(j, Phase::kSteady);
    if (j + 1 < steady)
      b.transfers({Builder::t(Transfer::kSendGradient, j), Builder::t(Transfer::kRecvActivation, f + 1)});
    else
      b.transfers({Builder::t(Transfer::kSendGradient, j)});
  }
  for (int i = 0; i < warm; ++i) {
    const int mb = steady + i;
    b.transfers({Builder::t(Transfer::kRecvGradient, mb)});
    b.backward(mb, Phase::kCooldown);
    b.transfers({Builder::t(Transfer::kSendGradient, mb)});
  }
  return b.out;
}

// Local updates: no stage waits for a later one's backward. Chunked: forward, local
// backward, nothing sent back. Overlapping: after the forward, stage s > 0 runs the previous
// stage's local head and sends its gradient back; stage s < p - 1 then waits for the
// gradient of its own head from stage s + 1 (which sends it right after its forward).
std::vector<Action> local(int stages, int stage, int m, bool overlap) {
  Builder b(stages, stage);
  for (int i = 0; i < m; ++i) {
    b.transfers({Builder::t(Transfer::kRecvActivation, i)});
    b.forward(i, Phase::kSteady);
    b.transfers({Builder::t(Transfer::kSendActivation, i)});
    if (overlap && stage > 0) {
      b.localBackward(i, Phase::kSteady);
      b.transfers({Builder::t(Transfer::kSendGradient, i)});
    }
    if (overlap) b.transfers({Builder::t(Transfer::kRecvGradient, i)});
    b.backward(i, Phase::kSteady);
  }
  return b.out;
}

}  // namespace

std::vector<std::vector<Action>> pipelineSchedules(PipeSchedule kind, int stages, int microbatches, int slices) {
  if (stages < 1 || microbatches < 1 || slices < 1)
    throw std::invalid_argument("a pipeline needs a stage, a micro-batch and a slice");
  if (slices > 1 && kind != PipeSchedule::kGPipe) throw std::invalid_argument("token slices run with --schedule gpipe");
  std::vector<std::vector<Action>> all;
  for (int s = 0; s < stages; ++s) {
    if (kind == PipeSchedule::kGPipe)
      all.push_back(gpipe(stages, s, microbatches, slices));
    else if (kind == PipeSchedule::k1F1B)
      all.push_back(oneForwardOneBackward(stages, s, microbatches));
    else
      all.push_back(local(stages, s, microbatches, kind == PipeSchedule::kLocalOverlap));
  }
  // Each transfer takes the phase of the computation that produced its data: the sender's
  // forward (activations) or backward (gradients) of that micro-batch.
  auto producerPhase = [&](int stage, Action::Kind k, int mb) {
    for (const Action& a : all[static_cast<size_t>(stage)])
      if (a.kind == k && a.microbatch == mb) return a.phase;
    throw std::logic_error("schedule: a transfer without its computation");
  };
  for (int s = 0; s < stages; ++s)
    for (Action& a : all[static_cast<size_t>(s)])
      for (Transfer& t : a.transfers) {
        const bool activation = t.kind == Transfer::kSendActivation || t.kind == Transfer::kRecvActivation;
        const int producer = t.send() ? s : t.peer(s);
        const Action::Kind made = activation                            ? Action::kForward
                                  : kind == PipeSchedule::kLocalOverlap ? Action::kLocalBackward
                                                                        : Action::kBackward;
        t.phase = producerPhase(producer, made, t.microbatch);
      }
  return all;
}

int activationSlots(const std::vector<Action>& actions) {
  std::set<int> live;
  size_t most = 0;
  auto touch = [&](int mb) {
    live.insert(mb);
    most = std::max(most, live.size());
  };
  for (const Action& a : actions) {
    if (a.kind == Action::kForward) touch(a.microbatch);
    if (a.kind == Action::kBackward) live.erase(a.microbatch);
    for (const Transfer& t : a.transfers)
      if (t.kind == Transfer::kRecvActivation) touch(t.microbatch);
  }
  return static_cast<int>(std::max<size_t>(most, 1));
}

std::vector<double> simulatePipeline(const std::vector<std::vector<Action>>& schedules,
                                     const std::function<double(int, const Action&)>& duration) {
  const int n = static_cast<int>(schedules.size());
  std::vector<size_t> next(static_cast<size_t>(n), 0);
  std::vector<double> clock(static_cast<size_t>(n), 0.0);
  std::vector<bool> posted(static_cast<size_t>(n), false);
  std::vector<std::vector<double>> matchedAt(
      static_cast<size_t>(n));  // per transfer of the current group; < 0: not yet
  struct Posted {
    int stage;
    size_t transfer;
    int microbatch;
  };
  std::map<std::pair<int, int>, std::pair<std::deque<Posted>, std::deque<Posted>>>
      channels;  // (from, to): sends, receives
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < n; ++s) {
      const std::vector<Action>& list = schedules[static_cast<size_t>(s)];
      while (next[static_cast<size_t>(s)] < list.size()) {
        const Action& a = list[next[static_cast<size_t>(s)]];
        if (a.kind != Action::kTransfer) {
          clock[static_cast<size_t>(s)] += duration(s, a);
          ++next[static_cast<size_t>(s)];
          progress = true;
          continue;
        }
        std::vector<double>& matched = matchedAt[static_cast<size_t>(s)];
        if (!posted[static_cast<size_t>(s)]) {
          posted[static_cast<size_t>(s)] = true;
          matched.assign(a.transfers.size(), -1.0);
          for (size_t i = 0; i < a.transfers.size(); ++i) {
            const Transfer& t = a.transfers[i];
            const int peer = t.peer(s);
            if (peer < 0 || peer >= n) throw std::logic_error("schedule: a transfer to a stage that does not exist");
            auto& ch = t.send() ? channels[{s, peer}].first : channels[{peer, s}].second;
            ch.push_back({s, i, t.microbatch});
          }
          progress = true;
        }
        // Match the heads of every channel.
        for (auto& [ends, queues] : channels) {
          auto& [sends, recvs] = queues;
          while (!sends.empty() && !recvs.empty()) {
            const Posted snd = sends.front(), rcv = recvs.front();
            sends.pop_front();
            recvs.pop_front();
            if (snd.microbatch != rcv.microbatch)
              throw std::logic_error("schedule: stage " + std::to_string(rcv.stage) + " receives micro-batch " +
                                     std::to_string(snd.microbatch) + " where it expects " +
                                     std::to_string(rcv.microbatch));
            const double at = std::max(clock[static_cast<size_t>(snd.stage)], clock[static_cast<size_t>(rcv.stage)]);
            matchedAt[static_cast<size_t>(snd.stage)][snd.transfer] = at;
            matchedAt[static_cast<size_t>(rcv.stage)][rcv.transfer] = at;
            progress = true;
          }
        }
        if (std::any_of(matched.begin(), matched.end(), [](double t) { return t < 0; })) break;
        clock[static_cast<size_t>(s)] =
            std::max(clock[static_cast<size_t>(s)], *std::max_element(matched.begin(), matched.end()));
        posted[static_cast<size_t>(s)] = false;
        ++next[static_cast<size_t>(s)];
      }
    }
  }
  for (int s = 0; s < n; ++s)
    if (next[static_cast<size_t>(s)] < schedules[static_cast<size_t>(s)].size())
      throw std::logic_error("schedule: deadlock (stage " + std::to_string(s) + " waits at action " +
                             std::to_string(next[static_cast<size_t>(s)]) + ")");
  return clock;
}

}  // namespace gpt
