// SPDX-License-Identifier: BSD-3-Clause
// ccl as a torch.distributed backend for CPU tensors: a c10d::Backend over one ccl
// communicator whose unique id travels through the group's c10d Store. Every call is checked
// on the caller's thread (a bad tensor raises there) and runs on the communicator's FIFO
// worker; the Work it returns completes when the call has run.
#pragma once

#include <ccl/ccl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "work.h"

namespace ccl::torch {

// What a process group asks of ccl beyond the group itself (Python: ccl.torch.Options).
struct Settings {
  // The communicator's codec; unset: CCL_CODEC and CCL_CODEC_* decide, as for any ccl program.
  std::optional<cclCompression_t> compression;
  // The collectives that codec applies to, as CCL_COMPRESS spells them; empty: CCL_COMPRESS.
  std::string compress;
  std::string name;  // log lines' communicator name
};

class Backend : public c10d::Backend {
 public:
  static constexpr const char* kName = "cclz";

  Backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
          Settings settings);
  ~Backend() override;

  // A backend over a communicator made by shrink(): it owns `comm`.
  Backend(cclComm_t comm, int rank, int size, std::chrono::milliseconds timeout, Settings settings);

  const std::string getBackendName() const override { return kName; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override {
    return all_to_all_single(output, input, outputSplits, inputSplits, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // Refused, as NVIDIA's NCCL refuses it: every receive names its peer.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Sequence numbers (what TORCH_DISTRIBUTED_DEBUG=DETAIL's checks ask for): the collectives
  // this group has issued, counted alike on every rank, as PyTorch's NCCL backend counts
  // them; point-to-point calls are not counted.
  uint64_t getSequenceNumberForGroup() override { return collectiveSeq_; }

  // Calls between startCoalescing and endCoalescing run as one ccl group (NCCL's
  // semantics): batch_isend_irecv's sends and receives cannot deadlock on each other.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // torch.distributed.shrink_group: the ranks that go on make a communicator with
  // cclCommShrink, which sends nothing over this group (a lost rank may have broken it).
  // SHRINK_ABORT (1, NCCL's and ccl's value) revokes this communicator first, so calls queued
  // or running on it fail promptly; otherwise they run first. The new backend keeps this
  // one's settings and timeout; the communicator's implicit error-feedback state moves to it.
  // This backend takes no calls afterwards (PyTorch destroys its group).
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                           const c10::intrusive_ptr<Options>& optsOverride) override;

  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  // Aborts the communicator: calls still queued fail, and so does every later one.
  void abort() override;
  // Runs what is queued, then destroys the communicator.
  void shutdown() override;

  // The communicator's counters (cclCommGetStats) by collective: calls, compressed calls,
  // raw bytes, wire bytes, codec seconds.
  std::map<std::string, std::map<std::string, double>> stats();
  // The ccl communicator, for code that calls ccl's C API on this group (e.g. a DDP hook).
  cclComm_t comm() const { return comm_.load(); }

 private:
  using Body = std::function<void()>;
  // A call's `issue` makes its ccl calls; `finish` (optional) copies results out once they
  // have completed, which inside a group is only after cclGroupEnd.
  struct Pending {
    c10::intrusive_ptr<Work> work;
    Body issue, finish;
    std::exception_ptr refused;  // a call its checks refused while coalescing (deferRefusal)
  };
  // `riders`: Works of calls that `issue` runs too (coalesced ones), completed with this one's.
  c10::intrusive_ptr<c10d::Work> post(c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
                                      std::chrono::milliseconds timeout, Body issue, Body finish = {},
                                      std::vector<c10::intrusive_ptr<Work>> riders = {});
  // Runs `call` (a send or receive: its checks, then post). While coalescing, a call its
  // checks refuse does not raise: the coalesced calls fail together at endCoalescing, none
  // of them run, and wait() raises the refusal. PyTorch's coalescing manager (under
  // batch_isend_irecv) does not end coalescing when a call raises inside it, and every later
  // call of the group would then only be recorded, never run: silently wrong results.
  c10::intrusive_ptr<c10d::Work> deferRefusal(c10d::OpType type, const char* what,
                                              const std::function<c10::intrusive_ptr<c10d::Work>()>& call);
  void check(cclResult_t result, const char* what) const;
  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds opTimeout) const;
  // The *Ex compression argument for operations of `kind`: NULL (the communicator's policy)
  // unless the settings name the collectives, then the codec or explicitly none.
  const cclCompression_t* compressionFor(cclOpKind_t kind) const;

  std::atomic<cclComm_t> comm_{nullptr};  // abort() may run on another thread than the worker
  std::chrono::milliseconds timeout_;
  Settings settings_;
  cclCompression_t none_ = CCL_COMPRESSION_INITIALIZER;
  unsigned int compressed_ = 0;  // settings_.compress parsed: a bit per cclOpKind_t
  bool coalescing_ = false;      // between startCoalescing and endCoalescing (caller's thread)
  uint64_t collectiveSeq_ = 0;   // collectives issued (caller's thread)
  std::vector<Pending> coalesced_;
  std::unique_ptr<Worker> worker_;  // reset before comm_ is destroyed
};

}  // namespace ccl::torch
