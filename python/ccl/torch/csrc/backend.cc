// SPDX-License-Identifier: BSD-3-Clause
#include "backend.h"

#include <ATen/ThreadLocalState.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>

namespace ccl::torch {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

const char* const kUnsupportedDevice =
    "the ccl backend ('cclz') serves CPU tensors; for CUDA tensors use the 'nccl' backend with ccl's NCCL face "
    "preloaded (LD_PRELOAD=libccl_nccl.so)";

cclDataType_t dtypeOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kChar:
      return cclInt8;
    case at::kByte:
      return cclUint8;
    case at::kInt:
      return cclInt32;
    case at::kUInt32:
      return cclUint32;
    case at::kLong:
      return cclInt64;
    case at::kUInt64:
      return cclUint64;
    case at::kHalf:
      return cclFloat16;
    case at::kFloat:
      return cclFloat32;
    case at::kDouble:
      return cclFloat64;
    case at::kBFloat16:
      return cclBfloat16;
    case at::kFloat8_e4m3fn:
      return cclFloat8e4m3;
    case at::kFloat8_e5m2:
      return cclFloat8e5m2;
    case at::kBool:  // one byte, 0 or 1 (reductions: redOpOf)
      return cclUint8;
    default:
      TORCH_CHECK_TYPE(false, "ccl: tensors of type ", t.scalar_type(),
                       " are not supported (bool, int8, uint8, int32, uint32, int64, uint64, float16, float32, "
                       "float64, bfloat16, float8_e4m3fn, float8_e5m2 are)");
  }
}

// Where a tensor's memory is used: in place by ccl (contiguous, as NCCL's backend requires),
// or only read or copied into by this backend (any strides: a contiguous copy is made).
enum class Layout { kInPlace, kAnyStrides };

void checkTensor(const at::Tensor& t, const char* what, Layout layout = Layout::kInPlace) {
  TORCH_CHECK_VALUE(t.defined(), "ccl: ", what, ": an undefined tensor");
  TORCH_CHECK_VALUE(t.device().is_cpu(), "ccl: ", what, ": a tensor on ", t.device(), ": ", kUnsupportedDevice);
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "ccl: ", what, ": sparse tensors are not supported");
  TORCH_CHECK_VALUE(layout == Layout::kAnyStrides || t.is_contiguous(), "ccl: ", what,
                    ": the tensor must be contiguous (call .contiguous() first)");
  dtypeOf(t);
}

// A tensor the call only reads, checked and made contiguous (a copy where it is not).
at::Tensor input(const at::Tensor& t, const char* what) {
  checkTensor(t, what, Layout::kAnyStrides);
  return t.contiguous();
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what, Layout layout = Layout::kInPlace) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "ccl: ", what, " takes one tensor per call, got ", tensors.size());
  checkTensor(tensors[0], what, layout);
  return tensors[0];
}

void checkSame(const at::Tensor& a, const at::Tensor& b, const char* what, Layout layout = Layout::kInPlace) {
  checkTensor(b, what, layout);
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "ccl: ", what, ": tensors of different types (", a.scalar_type(),
                   " and ", b.scalar_type(), ")");
}

// `op` on tensors like `t`. Booleans travel as bytes of 0 and 1, so their sum is a logical or
// (max) and their product a logical and (min), as PyTorch's NCCL backend reduces them.
cclRedOp_t redOpOf(const c10d::ReduceOp& op, const at::Tensor& t) {
  if (t.scalar_type() == at::kBool) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
        return cclMax;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN:
        return cclMin;
      default:
        TORCH_CHECK_VALUE(false, "ccl: reduce op ", static_cast<int>(op.op_),
                          " is not defined on bool tensors (SUM, PRODUCT, MIN and MAX are)");
    }
  }
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return cclSum;
    case c10d::ReduceOp::AVG:
      return cclAvg;
    case c10d::ReduceOp::PRODUCT:
      return cclProd;
    case c10d::ReduceOp::MIN:
      return cclMin;
    case c10d::ReduceOp::MAX:
      return cclMax;
    default:
      TORCH_CHECK_VALUE(false, "ccl: reduce op ", static_cast<int>(op.op_),
                        " is not supported (SUM, AVG, PRODUCT, MIN and MAX are)");
  }
}

void checkRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "ccl: ", what, ": root ", root, " is not a rank of a group of ", size);
}

// One tensor per call: the root's tensor can only be the first.
void checkRootTensor(int64_t rootTensor, const char* what) {
  TORCH_CHECK_VALUE(rootTensor == 0, "ccl: ", what, ": rootTensor ", rootTensor,
                    " does not name a tensor of the list (one tensor per call: rootTensor must be 0)");
}

void checkPeer(int peer, int rank, int size, const char* what) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size && peer != rank, "ccl: ", what, ": peer ", peer,
                    " is not another rank of a group of ", size, " (this is rank ", rank, ")");
}

// One flat tensor holding `parts` back to back (they are copied in).
at::Tensor flatten(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  flat.reserve(parts.size());
  for (const auto& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

// A list of `n` tensors like `like`, which the backend reads or copies into (any strides).
void checkList(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t n, const char* what) {
  TORCH_CHECK_VALUE(list.size() == n, "ccl: ", what, ": a list of ", n, " tensors expected, got ", list.size());
  for (const auto& t : list) {
    checkSame(like, t, what, Layout::kAnyStrides);
    TORCH_CHECK_VALUE(t.numel() == like.numel(), "ccl: ", what, ": every tensor of the list must have ", like.numel(),
                      " elements, one has ", t.numel());
  }
}

struct Group {
  Group() {
    const cclResult_t r = cclGroupStart();
    TORCH_CHECK(r == cclSuccess, "ccl: cclGroupStart: ", cclGetErrorString(r));
  }
  ~Group() {
    if (!ended) cclGroupEnd();  // unwinding: the group's error is already on its way
  }
  cclResult_t end() {
    ended = true;
    return cclGroupEnd();
  }
  bool ended = false;
};

}  // namespace

Backend::Backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
                 Settings settings)
    : c10d::Backend(rank, size), timeout_(timeout), settings_(std::move(settings)) {
  TORCH_CHECK_VALUE(settings_.compress.empty() || settings_.compression,
                    "ccl: naming the collectives to compress needs a codec");
  if (!settings_.compress.empty()) check(cclCompressListParse(settings_.compress.c_str(), &compressed_), "compress");

  // Rank 0 makes the id; the others wait for it in the group's store (a prefix store of its
  // own per group, so one key serves every group). Each says it has read it, and rank 0
  // removes the key before it joins: a group made again under the same prefix (after
  // destroy_process_group, PyTorch numbers groups from the start) must not read this id.
  cclUniqueId id;
  const std::string key = "ccl_unique_id";
  auto readBy = [](int r) { return "ccl_unique_id_read/" + std::to_string(r); };
  if (rank == 0) {
    check(cclGetUniqueId(&id), "cclGetUniqueId");
    std::vector<uint8_t> bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    store->set(key, bytes);
    std::vector<std::string> reads;
    for (int r = 1; r < size; ++r) reads.push_back(readBy(r));
    if (!reads.empty()) store->wait(reads, timeout);
    try {
      store->deleteKey(key);
      for (const std::string& k : reads) store->deleteKey(k);
    } catch (const c10::Error&) {
      // A store without deleteKey: the group can be made once per prefix, as before.
    }
  } else {
    const std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof id, "ccl: the unique id in the store has ", bytes.size(), " bytes, not ",
                sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
    store->set(readBy(rank), std::vector<uint8_t>{1});
  }
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  if (!settings_.name.empty()) config.commName = settings_.name.c_str();
  if (settings_.compression) config.compression = &*settings_.compression;
  cclComm_t comm = nullptr;
  check(cclCommInitRankConfig(&comm, size, id, rank, &config), "cclCommInitRankConfig");
  comm_ = comm;
  worker_ = std::make_unique<Worker>("ccl-c10d");
}

Backend::Backend(cclComm_t comm, int rank, int size, std::chrono::milliseconds timeout, Settings settings)
    : c10d::Backend(rank, size), timeout_(timeout), settings_(std::move(settings)) {
  if (!settings_.compress.empty()) check(cclCompressListParse(settings_.compress.c_str(), &compressed_), "compress");
  comm_ = comm;
  worker_ = std::make_unique<Worker>("ccl-c10d");
}

Backend::~Backend() { shutdown(); }

c10::intrusive_ptr<c10d::Backend> Backend::shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                                  const c10::intrusive_ptr<Options>& /*optsOverride*/) {
  TORCH_CHECK_VALUE(shrinkFlags == CCL_SHRINK_DEFAULT || shrinkFlags == CCL_SHRINK_ABORT,
                    "ccl: shrink_flags must be SHRINK_DEFAULT (0) or SHRINK_ABORT (1), got ", shrinkFlags);
  cclComm_t parent = comm();
  TORCH_CHECK_VALUE(parent && worker_, "ccl: shrink of a process group that was shut down or aborted");
  std::vector<int> exclude;
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "ccl: rank ", r, " to exclude is outside the group of ", size_);
    exclude.push_back(static_cast<int>(r));
  }
  // Calls queued on the worker go first: failing at once after a revoke, or running.
  if (shrinkFlags == CCL_SHRINK_ABORT) check(cclCommRevoke(parent, 0), "cclCommRevoke");
  worker_.reset();
  cclComm_t made = nullptr;
  check(cclCommShrink(parent, exclude.data(), static_cast<int>(exclude.size()), &made, nullptr, shrinkFlags),
        "cclCommShrink");
  int rank = 0, size = 0;
  check(cclCommUserRank(made, &rank), "cclCommUserRank");
  check(cclCommCount(made, &size), "cclCommCount");
  return c10::make_intrusive<Backend>(made, rank, size, timeout_, settings_);
}

void Backend::shutdown() {
  worker_.reset();  // runs what is queued
  if (cclComm_t c = comm_.exchange(nullptr)) cclCommDestroy(c);
}

void Backend::abort() {
  // A call blocked on the worker returns promptly once the communicator is aborted; the
  // queued ones then find no communicator and fail.
  if (cclComm_t c = comm_.exchange(nullptr)) cclCommAbort(c);
  worker_.reset();
}

void Backend::check(cclResult_t result, const char* what) const {
  if (result == cclSuccess) return;
  std::string msg = std::string("ccl: ") + what + " failed: " + cclGetErrorString(result);
  const char* detail = cclGetLastError(nullptr);  // this thread's last failure
  if (detail && *detail) msg += std::string(": ") + detail;
  C10_THROW_ERROR(DistBackendError, msg);
}

std::chrono::milliseconds Backend::timeoutOf(std::chrono::milliseconds opTimeout) const {
  return opTimeout == c10d::kUnsetTimeout ? timeout_ : opTimeout;
}

const cclCompression_t* Backend::compressionFor(cclOpKind_t kind) const {
  if (settings_.compress.empty()) return nullptr;
  return (compressed_ >> kind) & 1 ? &*settings_.compression : &none_;
}

WorkPtr Backend::post(OpType type, const char* what, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
                      Body issue, Body finish, std::vector<c10::intrusive_ptr<Work>> riders) {
  TORCH_CHECK_VALUE(worker_ && comm(), "ccl: ", what, " on a process group that was shut down or aborted");
  auto work = c10::make_intrusive<Work>(rank_, type, what, std::move(outputs), timeoutOf(timeout));
  if (type != OpType::SEND && type != OpType::RECV && type != OpType::COALESCED) ++collectiveSeq_;
  if (coalescing_) {
    coalesced_.push_back({work, std::move(issue), std::move(finish), nullptr});
    return work;
  }
  // The worker runs the call under the caller's thread-local state (inference mode, grad
  // mode, ...), as if the caller ran it: outputs made under torch.inference_mode() are
  // written in that mode.
  worker_->post([work, riders = std::move(riders), worker = worker_.get(), issue = std::move(issue),
                 finish = std::move(finish), state = at::ThreadLocalState()]() mutable {
    std::exception_ptr error;
    {
      at::ThreadLocalStateGuard guard(state);
      try {
        issue();
        if (finish) finish();
      } catch (...) {
        error = std::current_exception();
      }
    }
    // What the call holds (its tensors, the caller's thread-local state) is parked before its
    // Works complete, for the caller's wait() to release (Worker); the Works move into their
    // completions. This task then holds nothing of the caller's.
    worker->parked()->park([issue = std::move(issue), finish = std::move(finish), state = std::move(state)] {});
    issue = nullptr;
    finish = nullptr;
    for (auto& rider : riders) Work::complete(std::move(rider), error, *worker);
    Work::complete(std::move(work), error, *worker);
  });
  return work;
}

WorkPtr Backend::deferRefusal(OpType type, const char* what, const std::function<WorkPtr()>& call) {
  if (!coalescing_) return call();
  try {
    return call();
  } catch (const std::exception&) {
    auto work = c10::make_intrusive<Work>(rank_, type, what, std::vector<at::Tensor>{}, timeoutOf(c10d::kUnsetTimeout));
    coalesced_.push_back({work, {}, {}, std::current_exception()});
    return work;
  }
}

void Backend::startCoalescing() {
  TORCH_CHECK_VALUE(!coalescing_, "ccl: startCoalescing while already coalescing");
  coalescing_ = true;
}

WorkPtr Backend::endCoalescing() {
  TORCH_CHECK_VALUE(coalescing_, "ccl: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<Pending> calls = std::move(coalesced_);
  coalesced_.clear();
  std::vector<at::Tensor> outputs;
  std::vector<c10::intrusive_ptr<Work>> works;
  for (auto& c : calls) {
    const auto r = c.work->result();
    outputs.insert(outputs.end(), r.begin(), r.end());
    works.push_back(std::move(c.work));
  }
  // The group's own Work completes with its calls' (a batch_isend_irecv waits on it), with
  // the same error: they ride on it.
  return post(
      OpType::COALESCED, "coalesced calls", std::move(outputs), c10d::kUnsetTimeout,
      [this, calls] {
        // A refused call fails them all before any is issued (the peers' then fail by timeout).
        for (const auto& c : calls)
          if (c.refused) std::rethrow_exception(c.refused);
        Group group;
        for (const auto& c : calls) c.issue();
        check(group.end(), "cclGroupEnd (coalesced calls)");
        for (const auto& c : calls)
          if (c.finish) c.finish();
      },
      {}, std::move(works));
}

WorkPtr Backend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor t = single(tensors, "broadcast");
  checkRoot(opts.rootRank, size_, "broadcast");
  checkRootTensor(opts.rootTensor, "broadcast");
  const auto* z = compressionFor(cclOpBroadcast);
  return post(OpType::BROADCAST, "broadcast", {t}, opts.timeout, [this, t, root = int(opts.rootRank), z] {
    check(cclBroadcastEx(t.data_ptr(), t.data_ptr(), t.numel(), dtypeOf(t), root, comm(), nullptr, z), "cclBroadcast");
  });
}

WorkPtr Backend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor t = single(tensors, "allreduce");
  const cclRedOp_t op = redOpOf(opts.reduceOp, t);
  const auto* z = compressionFor(cclOpAllReduce);
  return post(OpType::ALLREDUCE, "allreduce", {t}, opts.timeout, [this, t, op, z] {
    check(cclAllReduceEx(t.data_ptr(), t.data_ptr(), t.numel(), dtypeOf(t), op, comm(), nullptr, z, nullptr),
          "cclAllReduce");
  });
}

WorkPtr Backend::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "ccl: allreduce_coalesced of no tensors");
  std::vector<cclRedOp_t> ops;
  for (const auto& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    ops.push_back(redOpOf(opts.reduceOp, t));
  }
  const auto* z = compressionFor(cclOpAllReduce);
  return post(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, opts.timeout, [this, tensors, ops, z] {
    Group group;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor& t = tensors[i];
      check(cclAllReduceEx(t.data_ptr(), t.data_ptr(), t.numel(), dtypeOf(t), ops[i], comm(), nullptr, z, nullptr),
            "cclAllReduce");
    }
    check(group.end(), "cclGroupEnd (allreduce_coalesced)");
  });
}

WorkPtr Backend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor t = single(tensors, "reduce");
  checkRoot(opts.rootRank, size_, "reduce");
  checkRootTensor(opts.rootTensor, "reduce");
  const cclRedOp_t op = redOpOf(opts.reduceOp, t);
  return post(OpType::REDUCE, "reduce", {t}, opts.timeout, [this, t, op, root = int(opts.rootRank)] {
    check(cclReduce(t.data_ptr(), t.data_ptr(), t.numel(), dtypeOf(t), op, root, comm(), nullptr), "cclReduce");
  });
}

WorkPtr Backend::all_gather_single(at::Tensor& output, at::Tensor& inputTensor, const c10d::AllgatherOptions& opts) {
  const at::Tensor input = ccl::torch::input(inputTensor, "all_gather_single");
  checkSame(input, output, "all_gather_single");
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "ccl: all_gather_single: the output has ", output.numel(),
                    " elements, not ", size_, " x ", input.numel());
  const auto* z = compressionFor(cclOpAllGather);
  return post(OpType::_ALLGATHER_BASE, "all_gather_single", {output}, opts.timeout, [this, output, input, z] {
    check(
        cclAllGatherEx(input.data_ptr(), output.data_ptr(), input.numel(), dtypeOf(input), comm(), nullptr, z, nullptr),
        "cclAllGather");
  });
}

WorkPtr Backend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                           const c10d::AllgatherOptions& opts) {
  const at::Tensor in = single(inputs, "allgather", Layout::kAnyStrides).contiguous();
  TORCH_CHECK_VALUE(outputs.size() == 1, "ccl: allgather takes one output list, got ", outputs.size());
  const std::vector<at::Tensor> outs = outputs[0];
  checkList(outs, in, size_, "allgather");
  const auto* z = compressionFor(cclOpAllGather);
  const at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  return post(
      OpType::ALLGATHER, "allgather", outs, opts.timeout,
      [this, in, flat, z] {
        check(cclAllGatherEx(in.data_ptr(), flat.data_ptr(), in.numel(), dtypeOf(in), comm(), nullptr, z, nullptr),
              "cclAllGather");
      },
      [this, in, outs, flat] {
        for (int r = 0; r < size_; ++r) outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view_as(outs[r]));
      });
}

WorkPtr Backend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                     std::vector<at::Tensor>& inputTensors, const c10d::AllgatherOptions& opts) {
  // c10d's layout: outputs[rank][input] receives rank's inputs[input].
  TORCH_CHECK_VALUE(!inputTensors.empty(), "ccl: allgather_coalesced of no tensors");
  TORCH_CHECK_VALUE(outputs.size() == size_t(size_), "ccl: allgather_coalesced: ", outputs.size(),
                    " output lists for a group of ", size_, " (one list per rank, each with one tensor per input)");
  std::vector<at::Tensor> inputs;
  for (const auto& in : inputTensors) inputs.push_back(input(in, "allgather_coalesced"));
  std::vector<at::Tensor> all, flats;
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK_VALUE(outputs[r].size() == inputs.size(), "ccl: allgather_coalesced: the output list of rank ", r,
                      " has ", outputs[r].size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkSame(inputs[i], outputs[r][i], "allgather_coalesced", Layout::kAnyStrides);
      TORCH_CHECK_VALUE(outputs[r][i].numel() == inputs[i].numel(), "ccl: allgather_coalesced: output ", i, " of rank ",
                        r, " has ", outputs[r][i].numel(), " elements, its input ", inputs[i].numel());
    }
    all.insert(all.end(), outputs[r].begin(), outputs[r].end());
  }
  for (const auto& in : inputs) flats.push_back(at::empty({in.numel() * size_}, in.options()));
  const auto* z = compressionFor(cclOpAllGather);
  return post(
      OpType::ALLGATHER_COALESCED, "allgather_coalesced", all, opts.timeout,
      [this, inputs, flats, z] {
        Group group;
        for (size_t i = 0; i < inputs.size(); ++i)
          check(cclAllGatherEx(inputs[i].data_ptr(), flats[i].data_ptr(), inputs[i].numel(), dtypeOf(inputs[i]), comm(),
                               nullptr, z, nullptr),
                "cclAllGather");
        check(group.end(), "cclGroupEnd (allgather_coalesced)");
      },
      [this, inputs, outputs, flats] {
        for (int r = 0; r < size_; ++r)
          for (size_t i = 0; i < inputs.size(); ++i)
            outputs[r][i].copy_(flats[i].narrow(0, r * inputs[i].numel(), inputs[i].numel()).view_as(outputs[r][i]));
      });
}

WorkPtr Backend::all_gather_single_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                             const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                    "ccl: allgather_into_tensor_coalesced: ", inputs.size(), " inputs and ", outputs.size(),
                    " outputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "allgather_into_tensor_coalesced");
    checkSame(inputs[i], outputs[i], "allgather_into_tensor_coalesced");
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * size_,
                      "ccl: allgather_into_tensor_coalesced: an output has ", outputs[i].numel(), " elements, not ",
                      size_, " x ", inputs[i].numel());
  }
  const auto* z = compressionFor(cclOpAllGather);
  return post(OpType::ALLGATHER_INTO_TENSOR_COALESCED, "allgather_into_tensor_coalesced", outputs, opts.timeout,
              [this, inputs, outputs, z] {
                Group group;
                for (size_t i = 0; i < inputs.size(); ++i)
                  check(cclAllGatherEx(inputs[i].data_ptr(), outputs[i].data_ptr(), inputs[i].numel(),
                                       dtypeOf(inputs[i]), comm(), nullptr, z, nullptr),
                        "cclAllGather");
                check(group.end(), "cclGroupEnd (allgather_into_tensor_coalesced)");
              });
}

WorkPtr Backend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                        const c10d::GatherOptions& opts) {
  const at::Tensor in = single(inputs, "gather", Layout::kAnyStrides).contiguous();
  checkRoot(opts.rootRank, size_, "gather");
  const int root = int(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1, "ccl: gather: the root takes one output list, got ", outputs.size());
    outs = outputs[0];
    checkList(outs, in, size_, "gather");
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "ccl: gather: only the root passes outputs");
  }
  const at::Tensor flat = rank_ == root ? at::empty({in.numel() * size_}, in.options()) : at::Tensor();
  return post(
      OpType::GATHER, "gather", outs, opts.timeout,
      [this, in, flat, root] {
        check(cclGather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, in.numel(), dtypeOf(in), root,
                        comm(), nullptr),
              "cclGather");
      },
      [in, outs, flat] {
        for (size_t r = 0; r < outs.size(); ++r)
          outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view_as(outs[r]));
      });
}

WorkPtr Backend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ScatterOptions& opts) {
  const at::Tensor out = single(outputs, "scatter");
  checkRoot(opts.rootRank, size_, "scatter");
  const int root = int(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1, "ccl: scatter: the root takes one input list, got ", inputs.size());
    ins = inputs[0];
    checkList(ins, out, size_, "scatter");
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "ccl: scatter: only the root passes inputs");
  }
  const at::Tensor flat = ins.empty() ? at::Tensor() : flatten(ins);
  return post(OpType::SCATTER, "scatter", {out}, opts.timeout, [this, out, flat, root] {
    check(cclScatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), out.numel(), dtypeOf(out), root,
                     comm(), nullptr),
          "cclScatter");
  });
}

WorkPtr Backend::reduce_scatter_single(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "reduce_scatter_single");
  checkSame(input, output, "reduce_scatter_single");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_, "ccl: reduce_scatter_single: the input has ",
                    input.numel(), " elements, not ", size_, " x ", output.numel());
  const cclRedOp_t op = redOpOf(opts.reduceOp, output);
  const auto* z = compressionFor(cclOpReduceScatter);
  return post(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_single", {output}, opts.timeout,
              [this, output, input, op, z] {
                check(cclReduceScatterEx(input.data_ptr(), output.data_ptr(), output.numel(), dtypeOf(output), op,
                                         comm(), nullptr, z, nullptr),
                      "cclReduceScatter");
              });
}

WorkPtr Backend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                const c10d::ReduceScatterOptions& opts) {
  const at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1, "ccl: reduce_scatter takes one input list, got ", inputs.size());
  const std::vector<at::Tensor> ins = inputs[0];
  const cclRedOp_t op = redOpOf(opts.reduceOp, out);
  TORCH_CHECK_VALUE(ins.size() == size_t(size_), "ccl: reduce_scatter: a list of ", size_, " tensors expected, got ",
                    ins.size());
  for (const auto& t : ins) checkSame(out, t, "reduce_scatter", Layout::kAnyStrides);
  const bool even = std::all_of(ins.begin(), ins.end(), [&](const at::Tensor& t) { return t.numel() == out.numel(); });
  if (!even) {
    // Sizes that differ per rank (as PyTorch's NCCL backend takes them): a reduce to each
    // rank of its part, in one group. Every rank passes the same sizes; this rank's part
    // has the output's size.
    TORCH_CHECK_VALUE(ins[rank_].numel() == out.numel(), "ccl: reduce_scatter: this rank's input (", rank_, ") has ",
                      ins[rank_].numel(), " elements, the output ", out.numel());
    std::vector<at::Tensor> parts;
    for (const auto& t : ins) parts.push_back(t.contiguous());
    return post(OpType::REDUCE_SCATTER, "reduce_scatter", {out}, opts.timeout, [this, out, parts, op] {
      Group group;
      for (int r = 0; r < size_; ++r)
        check(cclReduce(parts[r].data_ptr(), r == rank_ ? out.data_ptr() : nullptr, parts[r].numel(), dtypeOf(out), op,
                        r, comm(), nullptr),
              "cclReduce (reduce_scatter of uneven parts)");
      check(group.end(), "cclGroupEnd (reduce_scatter of uneven parts)");
    });
  }
  const auto* z = compressionFor(cclOpReduceScatter);
  const at::Tensor flat = flatten(ins);
  return post(OpType::REDUCE_SCATTER, "reduce_scatter", {out}, opts.timeout, [this, out, flat, op, z] {
    check(
        cclReduceScatterEx(flat.data_ptr(), out.data_ptr(), out.numel(), dtypeOf(out), op, comm(), nullptr, z, nullptr),
        "cclReduceScatter");
  });
}

WorkPtr Backend::reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                 const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                    "ccl: reduce_scatter_tensor_coalesced: ", inputs.size(), " inputs and ", outputs.size(),
                    " outputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "reduce_scatter_tensor_coalesced");
    checkSame(inputs[i], outputs[i], "reduce_scatter_tensor_coalesced");
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * size_,
                      "ccl: reduce_scatter_tensor_coalesced: an input has ", inputs[i].numel(), " elements, not ",
                      size_, " x ", outputs[i].numel());
  }
  std::vector<cclRedOp_t> ops;
  for (const auto& o : outputs) ops.push_back(redOpOf(opts.reduceOp, o));
  const auto* z = compressionFor(cclOpReduceScatter);
  return post(OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced", outputs, opts.timeout,
              [this, inputs, outputs, ops, z] {
                Group group;
                for (size_t i = 0; i < inputs.size(); ++i)
                  check(cclReduceScatterEx(inputs[i].data_ptr(), outputs[i].data_ptr(), outputs[i].numel(),
                                           dtypeOf(outputs[i]), ops[i], comm(), nullptr, z, nullptr),
                        "cclReduceScatter");
                check(group.end(), "cclGroupEnd (reduce_scatter_tensor_coalesced)");
              });
}

namespace {

// Element offsets and counts of `splits` rows of `rowElems` elements; no splits: equal parts.
void splitOffsets(const std::vector<int64_t>& splits, const at::Tensor& t, int size, const char* side,
                  std::vector<int64_t>* offsets, std::vector<int64_t>* counts) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "ccl: all_to_all_single: the ", side, "'s first dimension (", rows,
                      ") is not divisible by the group size ", size, " and no splits were given");
    for (int r = 0; r < size; ++r) {
      offsets->push_back(r * (rows / size) * rowElems);
      counts->push_back((rows / size) * rowElems);
    }
    return;
  }
  TORCH_CHECK_VALUE(splits.size() == size_t(size), "ccl: all_to_all_single: ", splits.size(), " ", side,
                    " splits for a group of ", size);
  int64_t at = 0;
  for (int64_t s : splits) {
    TORCH_CHECK_VALUE(s >= 0, "ccl: all_to_all_single: a negative ", side, " split");
    offsets->push_back(at * rowElems);
    counts->push_back(s * rowElems);
    at += s;
  }
  TORCH_CHECK_VALUE(at == rows, "ccl: all_to_all_single: the ", side, " splits add up to ", at, " rows, the ", side,
                    " has ", rows);
}

}  // namespace

WorkPtr Backend::all_to_all_single(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                   std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  checkTensor(input, "all_to_all_single");
  checkSame(input, output, "all_to_all_single");
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(input.numel() == output.numel() && input.numel() % size_ == 0,
                      "ccl: all_to_all_single: input and output need the same number of elements, a multiple of ",
                      size_, " (", input.numel(), " and ", output.numel(), ")");
    const auto* z = compressionFor(cclOpAlltoAll);
    return post(OpType::ALLTOALL_BASE, "all_to_all_single", {output}, opts.timeout, [this, output, input, z] {
      check(
          cclAlltoAllEx(input.data_ptr(), output.data_ptr(), input.numel() / size_, dtypeOf(input), comm(), nullptr, z),
          "cclAlltoAll");
    });
  }
  std::vector<int64_t> sendOff, sendCount, recvOff, recvCount;
  splitOffsets(inputSplits, input, size_, "input", &sendOff, &sendCount);
  splitOffsets(outputSplits, output, size_, "output", &recvOff, &recvCount);
  TORCH_CHECK_VALUE(sendCount[rank_] == recvCount[rank_], "ccl: all_to_all_single: this rank sends itself ",
                    sendCount[rank_], " elements but expects ", recvCount[rank_]);
  // Uneven splits: NCCL's way, one send and one receive per peer in one group.
  return post(OpType::ALLTOALL_BASE, "all_to_all_single", {output}, opts.timeout,
              [this, output, input, sendOff, sendCount, recvOff, recvCount] {
                const size_t elem = input.element_size();
                const auto* in = static_cast<const char*>(input.data_ptr());
                auto* out = static_cast<char*>(output.data_ptr());
                const cclDataType_t dt = dtypeOf(input);
                std::memcpy(out + recvOff[rank_] * elem, in + sendOff[rank_] * elem, sendCount[rank_] * elem);
                Group group;
                for (int peer = 0; peer < size_; ++peer) {
                  if (peer == rank_) continue;
                  if (sendCount[peer] > 0)
                    check(cclSend(in + sendOff[peer] * elem, sendCount[peer], dt, peer, comm(), nullptr), "cclSend");
                  if (recvCount[peer] > 0)
                    check(cclRecv(out + recvOff[peer] * elem, recvCount[peer], dt, peer, comm(), nullptr), "cclRecv");
                }
                check(group.end(), "cclGroupEnd (all_to_all_single)");
              });
}

WorkPtr Backend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                          const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == size_t(size_) && inputs.size() == size_t(size_), "ccl: alltoall: lists of ",
                    size_, " tensors expected, got ", inputs.size(), " inputs and ", outputs.size(), " outputs");
  std::vector<at::Tensor> sent;  // the inputs, read only: any strides (contiguous copies where needed)
  for (int r = 0; r < size_; ++r) {
    checkTensor(inputs[r], "alltoall", Layout::kAnyStrides);
    checkSame(inputs[r], outputs[r], "alltoall");
    sent.push_back(inputs[r].contiguous());
  }
  TORCH_CHECK_VALUE(inputs[rank_].numel() == outputs[rank_].numel(), "ccl: alltoall: this rank sends itself ",
                    inputs[rank_].numel(), " elements but expects ", outputs[rank_].numel());
  return post(OpType::ALLTOALL, "alltoall", outputs, opts.timeout, [this, outputs, inputs = std::move(sent)] {
    outputs[rank_].copy_(inputs[rank_]);
    Group group;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      if (inputs[peer].numel() > 0)
        check(cclSend(inputs[peer].data_ptr(), inputs[peer].numel(), dtypeOf(inputs[peer]), peer, comm(), nullptr),
              "cclSend");
      if (outputs[peer].numel() > 0)
        check(cclRecv(outputs[peer].data_ptr(), outputs[peer].numel(), dtypeOf(outputs[peer]), peer, comm(), nullptr),
              "cclRecv");
    }
    check(group.end(), "cclGroupEnd (alltoall)");
  });
}

WorkPtr Backend::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  return deferRefusal(OpType::SEND, "send", [&] {
    // Tags are not matched (NCCL does not either): sends to one peer arrive in call order.
    const at::Tensor t = single(tensors, "send", Layout::kAnyStrides).contiguous();
    checkPeer(dstRank, rank_, size_, "send");
    const auto* z = compressionFor(cclOpSend);
    return post(OpType::SEND, "send", {t}, c10d::kUnsetTimeout, [this, t, dstRank, z] {
      check(cclSendEx(t.data_ptr(), t.numel(), dtypeOf(t), dstRank, comm(), nullptr, z, nullptr), "cclSend");
    });
  });
}

WorkPtr Backend::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  return deferRefusal(OpType::RECV, "recv", [&] {
    const at::Tensor t = single(tensors, "recv");
    checkPeer(srcRank, rank_, size_, "recv");
    const auto* z = compressionFor(cclOpRecv);
    return post(OpType::RECV, "recv", {t}, c10d::kUnsetTimeout, [this, t, srcRank, z] {
      check(cclRecvEx(t.data_ptr(), t.numel(), dtypeOf(t), srcRank, comm(), nullptr, z), "cclRecv");
    });
  });
}

WorkPtr Backend::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  // As NVIDIA's NCCL: every receive names its peer (ccl's transports match by peer and tag).
  C10_THROW_ERROR(DistBackendError,
                  "ccl: recv without src (receive from any source) is not supported, as with the nccl backend: "
                  "pass the sender's rank (dist.recv(tensor, src=...))");
}

WorkPtr Backend::barrier(const c10d::BarrierOptions& opts) {
  // An allreduce of one byte: it returns on a rank once every rank has entered it.
  at::Tensor token = at::zeros({1}, at::kByte);
  return post(OpType::BARRIER, "barrier", {token}, opts.timeout, [this, token] {
    check(cclAllReduce(token.data_ptr(), token.data_ptr(), 1, cclUint8, cclSum, comm(), nullptr), "barrier");
  });
}

std::map<std::string, std::map<std::string, double>> Backend::stats() {
  TORCH_CHECK_VALUE(comm(), "ccl: stats of a process group that was shut down or aborted");
  cclStats_t s = CCL_STATS_INITIALIZER;
  check(cclCommGetStats(comm(), &s), "cclCommGetStats");
  std::map<std::string, std::map<std::string, double>> out;
  for (int k = 0; k < cclNumOpKinds; ++k)
    out[cclOpKindName(static_cast<cclOpKind_t>(k))] = {{"calls", double(s.op[k].calls)},
                                                       {"compressed_calls", double(s.op[k].compressedCalls)},
                                                       {"raw_bytes", double(s.op[k].rawBytes)},
                                                       {"wire_bytes", double(s.op[k].wireBytes)},
                                                       {"codec_seconds", s.op[k].codecSeconds},
                                                       {"auto_chosen", double(s.autoChosen[k])},
                                                       {"auto_compressed", double(s.autoCompressed[k])}};
  return out;
}

}  // namespace ccl::torch
