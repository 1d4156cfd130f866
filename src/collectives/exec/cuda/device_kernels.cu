// SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/cuda/cuda_check.h"
#include "collectives/exec/compute_steps.h"
#include "collectives/exec/cuda/device_kernels.h"
#include "collectives/exec/element_ops.h"
#include "common/activity.h"
#include "common/error.h"
#include "common/kernel_registry.h"

namespace ccl::coll {
namespace {

using namespace elem;

constexpr unsigned kThreads = 256;
constexpr size_t kStatusWords = 4096;

void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(cclUnhandledCudaError, std::string(what) + " failed: " + cudaGetErrorString(e));
}

unsigned blocksFor(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(b, 1, 8192));
}

// A batch of element-wise steps is one launch over a table of pieces (blockIdx.y picks the
// piece, the x blocks stride over its elements): a wave's reductions cost one command, not
// one per chunk. The table travels in the kernel's parameters (under CUDA's 4 KiB), so
// batches of more than kPieces steps take one launch per kPieces.
struct Piece {
  void* dst;
  const void* a;
  const void* b;
  uint64_t n;
  float divisor;  // narrow: the divisor, 1 for none
  uint32_t divide;
};
constexpr unsigned kPieces = 96;
struct Table {
  Piece p[kPieces];
};
static_assert(sizeof(Table) <= 4000, "a table must fit a kernel's parameters");

template <class F>
__global__ void __launch_bounds__(kThreads) tableKernel(Table t, F f) {
  const Piece& p = t.p[blockIdx.y];
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.n; i += stride) f(p, i);
}

template <class Tr, class Op>
struct ReduceOp {
  using S = typename Tr::Storage;
  __device__ void operator()(const Piece& p, uint64_t i) const {
    static_cast<S*>(p.dst)[i] = reduceOne<Tr, Op>(static_cast<const S*>(p.a)[i], static_cast<const S*>(p.b)[i]);
  }
};

// kReduce's `wide`: an fp32 sum (dst, a) and elements of the call's type (b).
template <class Tr, class Op>
struct WideReduceOp {
  __device__ void operator()(const Piece& p, uint64_t i) const {
    static_cast<float*>(p.dst)[i] =
        accumulateOne<Tr, Op>(static_cast<const float*>(p.a)[i], static_cast<const typename Tr::Storage*>(p.b)[i]);
  }
};

template <class Tr>
struct DivideOp {
  using S = typename Tr::Storage;
  typename Tr::Compute divisor;
  __device__ void operator()(const Piece& p, uint64_t i) const {
    static_cast<S*>(p.dst)[i] = divideOne<Tr>(static_cast<const S*>(p.a)[i], divisor);
  }
};

template <class Tr>
struct WidenOp {
  __device__ void operator()(const Piece& p, uint64_t i) const {
    static_cast<float*>(p.dst)[i] = widenOne<Tr>(static_cast<const typename Tr::Storage*>(p.a)[i]);
  }
};

template <class Tr>
struct NarrowOp {
  __device__ void operator()(const Piece& p, uint64_t i) const {
    static_cast<typename Tr::Storage*>(p.dst)[i] =
        narrowOne<Tr>(static_cast<const float*>(p.a)[i], p.divisor, p.divide != 0);
  }
};

struct DivideFloatOp {
  float divisor;
  __device__ void operator()(const Piece& p, uint64_t i) const { static_cast<float*>(p.dst)[i] /= divisor; }
};

// Random-k's stages around the ring of its streams' values (codec::RandKStage, the CPU's
// codec::runStage): one fp32 of non-finite news out of a stream's header (a = the stream,
// dst = the fp32), or into it (a = the summed fp32, dst = the stream).
struct NewsOutOp {
  __device__ void operator()(const Piece& p, uint64_t) const {
    *static_cast<float*>(p.dst) = codec::nonFiniteNews(static_cast<const uint8_t*>(p.a));
  }
};
struct NewsInOp {
  __device__ void operator()(const Piece& p, uint64_t) const {
    codec::takeNonFiniteNews(*static_cast<const float*>(p.a), static_cast<uint8_t*>(p.dst));
  }
};

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&tableKernel<DivideFloatOp>);

// Launches `f` over `pieces` in tables of kPieces; returns the launches.
template <class F>
size_t launchTables(const std::vector<Piece>& pieces, F f, cudaStream_t cs, const char* what) {
  size_t launches = 0;
  for (size_t first = 0; first < pieces.size(); first += kPieces) {
    Table t{};
    const size_t count = std::min<size_t>(kPieces, pieces.size() - first);
    uint64_t most = 0;
    for (size_t i = 0; i < count; ++i) {
      t.p[i] = pieces[first + i];
      most = std::max(most, t.p[i].n);
    }
    // As many blocks as one step of the largest piece would take, shared among the pieces.
    const unsigned x = std::max(1u, blocksFor(most) / static_cast<unsigned>(count));
    tableKernel<F><<<dim3(x, static_cast<unsigned>(count)), kThreads, 0, cs>>>(t, f);
    cudaOk(cudaGetLastError(), what);
    ++launches;
  }
  return launches;
}

// A batch of codec stages: random-k's (one table launch per stage kind); the api refuses
// the codec with stages of its own (powersgd) on device memory before planning. Returns the
// launches.
size_t enqueueStages(const Plan& plan, const Buffers& b, std::span<const StepId> steps, cudaStream_t cs) {
  std::vector<Piece> out, in;
  for (StepId id : steps) {
    const Step& s = plan.steps[id];
    if (plan.codecOf(s).codec != cclCodecRandK || (s.stage != codec::kRandKNewsOut && s.stage != codec::kRandKNewsIn))
      throw Error(cclInvalidUsage, "a codec's reduction stages (powersgd) run on host memory only");
    (s.stage == codec::kRandKNewsOut ? out : in)
        .push_back(Piece{bufferAt(b, s.dst), bufferAt(b, s.src), nullptr, 1, 1.0f, 0});
  }
  size_t launches = 0;
  if (!out.empty()) launches += launchTables(out, NewsOutOp{}, cs, "random-k news kernel");
  if (!in.empty()) launches += launchTables(in, NewsInOp{}, cs, "random-k news kernel");
  return launches;
}

}  // namespace

namespace {

// Status rings kernels objects gave back, for the next ones: freeing pinned memory
// (cudaFreeHost) waits for the whole device, where another communicator's work may wait for
// its peers, so a communicator's destroy or abort never frees one.
std::mutex& ringsMutex() {
  static std::mutex m;
  return m;
}
std::vector<uint32_t*>& spareRings() {
  static auto* r = new std::vector<uint32_t*>;  // never destroyed: the rings stay reachable
  return *r;
}

}  // namespace

CudaKernels::CudaKernels() {
  {
    std::lock_guard<std::mutex> lock(ringsMutex());
    if (!spareRings().empty()) {
      status_ = spareRings().back();
      spareRings().pop_back();
    }
  }
  if (!status_) {
    void* p = nullptr;
    cudaOk(cudaHostAlloc(&p, kStatusWords * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
           "cudaHostAlloc (decode status)");
    status_ = static_cast<uint32_t*>(p);
  }
  std::fill(status_, status_ + kStatusWords, 0u);
  void* d = nullptr;
  cudaOk(cudaHostGetDevicePointer(&d, status_, 0), "cudaHostGetDevicePointer");
  statusDevice_ = static_cast<uint32_t*>(d);
}

CudaKernels::~CudaKernels() {
  if (!status_) return;
  std::lock_guard<std::mutex> lock(ringsMutex());
  spareRings().push_back(status_);
}

uint32_t* CudaKernels::nextStatus() { return statusDevice_ + (nextStatus_++ % kStatusWords); }

void CudaKernels::enqueue(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, Stream& stream) {
  auto* cs = static_cast<cudaStream_t>(stream.native());
  CCL_CHECK(cs != nullptr, cclInternalError, "device kernels on a stream without a CUDA handle");
  if (steps.empty()) return;
  const Plan& plan = *run->plan;
  if (plan.steps[steps[0]].kind == StepKind::kCopy) {
    std::vector<Stream::Copy> copies;
    for (StepId id : steps) {
      const Step& s = plan.steps[id];
      copies.push_back({bufferAt(run->buffers, s.dst), bufferAt(run->buffers, s.src), s.bytes});
    }
    stream.copyBatch(copies);  // counted by the stream
    return;
  }
  const StepKind kind = plan.steps[steps[0]].kind;
  if (kind == StepKind::kReduce || kind == StepKind::kDivide || kind == StepKind::kWiden || kind == StepKind::kNarrow ||
      kind == StepKind::kDivideFloat) {
    stream.noteCommands(enqueueElementwise(run, steps, cs));
    return;
  }
  const uint64_t before = codec::cuda::commandsEnqueued;
  switch (kind) {
    case StepKind::kEncode:
      enqueueEncodes(run, steps, cs);
      break;
    case StepKind::kDecode:
    case StepKind::kDecodeAdd:
      enqueueDecodes(run, steps, cs);
      break;
    case StepKind::kDecodeAddEncode:
      stream.noteCommands(enqueueFused(run, steps, cs));
      break;
    case StepKind::kCodecStage:
      stream.noteCommands(enqueueStages(plan, run->buffers, steps, cs));
      break;
    default:
      throw Error(cclInternalError, "a transfer step was enqueued as a kernel");
  }
  stream.noteCommands(codec::cuda::commandsEnqueued - before);
}

namespace {

// Calls fn(intra, type, ids) for the steps of `steps` of each codec (a hierarchical plan's
// steps inside a node have their own) and element type (all as fp32 with anyType): what one
// batch of the CUDA codecs takes.
template <class Fn>
void byCodecAndType(const Plan& plan, std::span<const StepId> steps, bool anyType, Fn&& fn) {
  auto typeOf = [&](const Step& s) { return anyType ? cclFloat32 : s.type; };
  std::vector<std::pair<bool, cclDataType_t>> keys;
  for (StepId id : steps) {
    const std::pair<bool, cclDataType_t> k{plan.steps[id].intra, typeOf(plan.steps[id])};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<StepId> ids;
  for (const auto& [intra, type] : keys) {
    ids.clear();
    for (StepId id : steps)
      if (plan.steps[id].intra == intra && typeOf(plan.steps[id]) == type) ids.push_back(id);
    fn(intra, type, ids);
  }
}

// The error-feedback residual of an encode or a fused hop (nullptr without feedback).
float* residualOf(const Buffers& b, const Step& s) {
  return s.withFeedback ? reinterpret_cast<float*>(bufferAt(b, s.src2)) : nullptr;
}

// A batch's decodes store the call's status word (its first) or OR into it (the later ones),
// back to storing once the batch is enqueued, whether it threw or not.
class StatusMode {
 public:
  StatusMode(codec::cuda::Workspace& ws, bool orInto) : ws_(ws) { ws_.orStatus = orInto; }
  ~StatusMode() { ws_.orStatus = false; }
  StatusMode(const StatusMode&) = delete;
  StatusMode& operator=(const StatusMode&) = delete;

 private:
  codec::cuda::Workspace& ws_;
};

// The encodes a batch enqueues write a failed sender's stream when the call's status word
// (null before the call's first decode: nothing can have failed) is set as they run
// (Workspace::poison): a peer then fails with the news instead of decoding what the failed
// call left in its buffers. Back to none once the batch is enqueued.
class PoisonMode {
 public:
  PoisonMode(codec::cuda::Workspace& ws, const uint32_t* status) : ws_(ws) { ws_.poison = status; }
  ~PoisonMode() { ws_.poison = nullptr; }
  PoisonMode(const PoisonMode&) = delete;
  PoisonMode& operator=(const PoisonMode&) = delete;

 private:
  codec::cuda::Workspace& ws_;
};

}  // namespace

void CudaKernels::enqueueEncodes(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps,
                                 cudaStream_t cs) {
  ActivityScope busy("enqueuing a batch of encodes");
  const Plan& plan = *run->plan;
  PoisonMode poison(workspace_, run->decodeStatus);
  std::vector<codec::cuda::EncodeItem> items;
  byCodecAndType(plan, steps, false, [&](bool intra, cclDataType_t type, const std::vector<StepId>& ids) {
    items.clear();
    for (StepId id : ids) {
      const Step& s = plan.steps[id];
      items.push_back({bufferAt(run->buffers, s.src), s.count, bufferAt(run->buffers, s.dst), s.bytes,
                       residualOf(run->buffers, s), encodeSeed(plan, s, run->callSeed)});
    }
    codec::cuda::encodeBatch(intra ? plan.intraCodec : plan.codec, type, items, workspace_, cs);
  });
}

uint32_t* CudaKernels::statusWord(const std::shared_ptr<StreamRun>& run, bool* first) {
  // One status word per call: its first decodes store (so a replayed graph starts from its
  // own), the others OR in, and the call's one host function reads it (StreamRun::lastCheck).
  *first = run->decodeStatus == nullptr;
  if (*first) {
    run->decodeStatus = nextStatus();
    const uint32_t* host = status_ + (run->decodeStatus - statusDevice_);  // mapped: read once the stream ran
    run->lastCheck = [host, r = run.get()] {
      const uint32_t v = *const_cast<const volatile uint32_t*>(host);
      if (v == 0) return;
      r->failed.store(true, std::memory_order_release);
      codec::cuda::throwIfInvalid(v);
    };
  }
  return run->decodeStatus;
}

void CudaKernels::enqueueDecodes(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps,
                                 cudaStream_t cs) {
  ActivityScope busy("enqueuing a batch of decodes");
  const Plan& plan = *run->plan;
  const bool accumulate = plan.steps[steps[0]].kind == StepKind::kDecodeAdd;
  bool first = false;
  uint32_t* status = statusWord(run, &first);
  std::vector<codec::cuda::DecodeRequest> items;
  byCodecAndType(plan, steps, accumulate, [&](bool intra, cclDataType_t type, const std::vector<StepId>& ids) {
    items.clear();
    for (StepId id : ids) {
      const Step& s = plan.steps[id];
      items.push_back({bufferAt(run->buffers, s.src), run->slotBytes[s.slot], s.count, bufferAt(run->buffers, s.dst)});
    }
    StatusMode mode(workspace_, !first);
    first = false;
    codec::cuda::decodeBatch(items, (intra ? plan.intraCodec : plan.codec).codec, type, accumulate, status, workspace_,
                             cs);
  });
}

size_t CudaKernels::enqueueFused(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps,
                                 cudaStream_t cs) {
  ActivityScope busy("enqueuing a batch of fused hops");
  const Plan& plan = *run->plan;
  const Buffers& b = run->buffers;
  size_t launches = 0;
  bool first = false;
  uint32_t* status = statusWord(run, &first);
  std::vector<codec::cuda::HopItem> hops;
  std::vector<Piece> pieces, divided;
  std::vector<codec::cuda::DecodeRequest> decodes;
  std::vector<codec::cuda::EncodeItem> encodes;
  byCodecAndType(plan, steps, false, [&](bool intra, cclDataType_t type, const std::vector<StepId>& ids) {
    const codec::Params& params = intra ? plan.intraCodec : plan.codec;
    StatusMode mode(workspace_, !first);
    first = false;
    // Fixed-length quantizer streams (what device links carry): one kernel per batch of hops.
    if (codec::cuda::fusesHops(params)) {
      hops.clear();
      for (StepId id : ids) {
        const Step& s = plan.steps[id];
        hops.push_back({bufferAt(b, s.in), run->slotBytes[s.inSlot], bufferAt(b, s.src), s.count, bufferAt(b, s.dst),
                        s.bytes, residualOf(b, s), encodeSeed(plan, s, run->callSeed), s.divide && plan.nranks != 1});
      }
      codec::cuda::decodeAddEncodeBatch(params, type, static_cast<float>(plan.nranks), hops, status, workspace_, cs);
      return;
    }
    // Other codecs: each hop's fp32 sum in the sums workspace (256-byte aligned, for the
    // codecs' vector loads), made by the kernels of the unfused steps.
    std::vector<size_t> at(ids.size());
    size_t total = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      at[i] = total;
      total += (plan.steps[ids[i]].count * sizeof(float) + 255) & ~size_t{255};
    }
    auto* sums = static_cast<char*>(sums_.get(std::max<size_t>(total, 256), cs));
    pieces.clear();
    divided.clear();
    decodes.clear();
    encodes.clear();
    for (size_t i = 0; i < ids.size(); ++i) {
      const Step& s = plan.steps[ids[i]];
      auto* sum = reinterpret_cast<float*>(sums + at[i]);
      if (s.count) pieces.push_back(Piece{sum, bufferAt(b, s.src), nullptr, s.count, 1.0f, 0u});
      if (s.count && s.divide && plan.nranks != 1) divided.push_back(Piece{sum, nullptr, nullptr, s.count, 1.0f, 0u});
      decodes.push_back({bufferAt(b, s.in), run->slotBytes[s.inSlot], s.count, sum});
      encodes.push_back(
          {sum, s.count, bufferAt(b, s.dst), s.bytes, residualOf(b, s), encodeSeed(plan, s, run->callSeed)});
    }
    // The local values widened into the sums (fp32 copied: the widen of fp32 is exact).
    if (!pieces.empty())
      dispatchType(type, [&](auto tr) {
        using Tr = decltype(tr);
        if constexpr (kFloating<Tr>) {
          launches += launchTables(pieces, WidenOp<Tr>{}, cs, "widen kernel");
        } else {
          throw Error(cclInvalidArgument, "a fused hop over an integer type");
        }
      });
    codec::cuda::decodeBatch(decodes, params.codec, cclFloat32, true, status, workspace_, cs);
    if (!divided.empty())
      launches += launchTables(divided, DivideFloatOp{static_cast<float>(plan.nranks)}, cs, "divide kernel");
    PoisonMode poison(workspace_, status);
    codec::cuda::encodeBatch(params, cclFloat32, encodes, workspace_, cs);
  });
  return launches;  // the codecs count theirs (commandsEnqueued)
}

size_t CudaKernels::enqueueElementwise(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps,
                                       cudaStream_t cs) {
  const Plan& plan = *run->plan;
  const Buffers& b = run->buffers;
  const StepKind kind = plan.steps[steps[0]].kind;
  std::vector<Piece> pieces, wide;  // wide: kReduce's into fp32 sums
  for (StepId id : steps) {
    const Step& s = plan.steps[id];
    CCL_CHECK(s.kind == kind, cclInternalError, "a batch of steps of several kinds");
    if (!s.count) continue;
    const bool divide = s.kind == StepKind::kNarrow && s.divide && plan.nranks != 1;
    (s.kind == StepKind::kReduce && s.wide ? wide : pieces)
        .push_back(Piece{bufferAt(b, s.dst), bufferAt(b, s.src), bufferAt(b, s.src2), s.count,
                         divide ? static_cast<float>(plan.nranks) : 1.0f, divide ? 1u : 0u});
  }
  if (pieces.empty() && wide.empty()) return 0;
  size_t launches = 0;
  switch (kind) {
    case StepKind::kReduce:
      dispatchType(plan.dtype, [&](auto tr) {
        using Tr = decltype(tr);
        dispatchOp(plan.op, [&](auto op) {
          if (!pieces.empty()) launches += launchTables(pieces, ReduceOp<Tr, decltype(op)>{}, cs, "reduce kernel");
          if constexpr (kFloating<Tr>) {
            if (!wide.empty())
              launches += launchTables(wide, WideReduceOp<Tr, decltype(op)>{}, cs, "wide reduce kernel");
          } else {
            if (!wide.empty()) throw Error(cclInvalidArgument, "a wide reduction of an integer type");
          }
        });
      });
      return launches;
    case StepKind::kDivide:
      dispatchType(plan.dtype, [&](auto tr) {
        using Tr = decltype(tr);
        launches =
            launchTables(pieces, DivideOp<Tr>{static_cast<typename Tr::Compute>(plan.nranks)}, cs, "divide kernel");
      });
      return launches;
    case StepKind::kWiden:
    case StepKind::kNarrow:
      dispatchType(plan.dtype, [&](auto tr) {
        using Tr = decltype(tr);
        if constexpr (kFloating<Tr>) {
          launches = kind == StepKind::kWiden ? launchTables(pieces, WidenOp<Tr>{}, cs, "widen kernel")
                                              : launchTables(pieces, NarrowOp<Tr>{}, cs, "narrow kernel");
        } else {
          throw Error(cclInvalidArgument, "widen/narrow of an integer type");
        }
      });
      return launches;
    case StepKind::kDivideFloat:
      return launchTables(pieces, DivideFloatOp{static_cast<float>(plan.nranks)}, cs, "divide kernel");
    default:
      throw Error(cclInternalError, "a step that is not element-wise in an element-wise batch");
  }
}

}  // namespace ccl::coll
