// SPDX-License-Identifier: BSD-3-Clause
#include "api/device_calls.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/call.h"
#include "api/group.h"
#include "api/streams.h"
#include "collectives/exec/device.h"
#include "collectives/exec/device_runner.h"
#include "collectives/exec/links/factory.h"
#include "collectives/exec/stream_executor.h"
#include "common/cuda_probe.h"
#include "common/dtype.h"
#include "common/log.h"

namespace ccl::api {

struct DeviceComm {
  explicit DeviceComm(cclComm_t c) : runner(openDevice(c), [c](coll::Device& d) { return linkFor(c, d); }) {
    CCL_INFO("comm %p: device calls on %s device %d %s", static_cast<void*>(c), coll::deviceDriver()->name(),
             c->device.ordinal,
             c->device.nccl ? "over NVIDIA's NCCL"
                            : (std::string("staged through host memory over ") + c->links.transport->name()).c_str());
  }

  static std::unique_ptr<coll::Device> openDevice(cclComm_t c) {
    coll::DeviceDriver* driver = coll::deviceDriver();
    CCL_CHECK(driver && c->device.ordinal >= 0, cclInternalError, "a device call on a communicator without a device");
    return driver->open(c->device.ordinal);
  }
  // The communicator's link (CCL_DEVICE_TRANSPORT): NCCL, or staged through pinned host memory
  // over the communicator's transport.
  static std::unique_ptr<coll::StreamLink> linkFor(cclComm_t c, coll::Device& d) {
    return coll::makeLink(
        c->device.link,
        coll::LinkParts{c->links.transport.get(), c->device.nccl.get(), c->settings.timeout, &c->life.aborted}, d);
  }

  std::mutex mutex;           // calls from several threads enqueue one at a time
  coll::DeviceRunner runner;  // every call has run when it is destroyed; holds the plan cache
};

void DeviceCommDeleter::operator()(DeviceComm* d) const { delete d; }

DeviceCounts deviceCounts(cclComm_t comm) {
  DeviceCounts c;
  if (!comm->device.calls) return c;
  const coll::StreamCounts& n = comm->device.calls->runner.counts();
  c.commands = n.commands.load(std::memory_order_relaxed);
  c.hostFunctions = n.hostFunctions.load(std::memory_order_relaxed);
  return c;
}

namespace {

DeviceComm& deviceState(cclComm_t comm) {
  if (!comm->device.calls) comm->device.calls.reset(new DeviceComm(comm));
  return *comm->device.calls;
}

// The plan of this rank for call `c` with `args` and its wave schedule, which needs every
// rank's plan: the collective's at each rank, or for send and recv the pair's two ends.
coll::DeviceRunner::Planned planWith(DeviceComm& d, const DeviceCall& c, const coll::CollArgs& args, int rank,
                                     int nranks) {
  const bool p2p = c.kind == coll::Coll::kSend || c.kind == coll::Coll::kRecv;
  const size_t bytes = args.count * dataTypeSize(args.dtype);
  auto planOf = [&](const coll::CollArgs& with, int r) -> coll::Plan {
    coll::CollArgs a = with;
    a.rank = r;
    const bool compressed = a.codec.codec != cclCodecNone;
    if (!p2p) return coll::planCollective(c.kind, a);
    if (c.selfPair) {  // both ends here; the message pairs within the one plan
      if (r != rank) return coll::Plan{};
      if (compressed)
        return coll::mergePlans(coll::planCompressedSend(a, rank, 0), coll::planCompressedRecv(a, rank, 0));
      return coll::mergePlans(coll::planSend(rank, 0, bytes), coll::planRecv(rank, 0, bytes));
    }
    if (r != rank && r != c.peer) return coll::Plan{};
    const bool sends = (r == rank) == (c.kind == coll::Coll::kSend);  // the peer runs the mirror
    const int other = r == rank ? c.peer : rank;
    if (compressed) return sends ? coll::planCompressedSend(a, other, 0) : coll::planCompressedRecv(a, other, 0);
    return sends ? coll::planSend(other, 0, bytes) : coll::planRecv(other, 0, bytes);
  };
  return d.runner.plan(c.kind, args, planOf, rank, nranks);
}

// The call's plan for this communicator's link (DeviceRunner::plan). One the link declines
// (its streams at the bound not smaller than the data: fp16 scales, a high keep ratio over
// NCCL) goes uncompressed. Every rank decides alike, from the same plans.
const coll::DeviceRunner::Planned& planned(DeviceComm& d, const DeviceCall& c, int rank, int nranks) {
  return d.runner.planned(c.key, [&] {
    coll::DeviceRunner::Planned p = planWith(d, c, c.args, rank, nranks);
    if (p.declined) {
      CCL_INFO(
          "%s of %zu elements: %s streams at their bound (%zu bytes) are not smaller than the data (%zu); sent "
          "uncompressed",
          c.fn, c.args.count, cclCodecName(c.args.codec.codec), p.moved.posted, p.moved.raw);
      coll::CollArgs none = c.args;
      none.codec = codec::Params{};
      none.feedback = false;
      p = planWith(d, c, none, rank, nranks);
      p.declined = true;  // the plan without compression that stands for the declined one
    }
    return p;
  });
}

}  // namespace

bool declinedOnDevice(const DeviceCall& c) {
  ActiveGuard active(c.comm);
  DeviceComm& d = deviceState(c.comm);
  std::lock_guard<std::mutex> lock(d.mutex);
  coll::CurrentDevice current(d.runner.device());
  return planned(d, c, c.comm->rank, c.comm->nranks).declined;
}

std::string describeBuffers(std::initializer_list<NamedBuffer> buffers) {
  coll::DeviceDriver* driver = coll::deviceDriver();
  std::string out;
  for (const NamedBuffer& b : buffers) {
    if (!b.ptr) continue;
    char at[32];
    std::snprintf(at, sizeof(at), " %p: ", b.ptr);
    const std::string seen = driver ? driver->describe(b.ptr) : "";
    out += (out.empty() ? "" : "; ") + std::string(b.name) + at + (seen.empty() ? "host memory" : seen);
  }
  return out;
}

bool onDevice(cclComm_t comm, std::initializer_list<NamedBuffer> buffers, cclStream_t stream) {
  coll::DeviceDriver* driver = coll::deviceDriver();
  const NamedBuffer* host = nullptr;
  const NamedBuffer* device = nullptr;
  for (const NamedBuffer& b : buffers) {
    if (!b.ptr) continue;
    int where = -1;
    if (driver) {
      where = driver->deviceOf(b.ptr);
    } else if (cuda::deviceAvailable() && cuda::isDevicePointer(b.ptr)) {
      throw Error(cclInvalidUsage, std::string(b.name) +
                                       " is device memory, but this build of ccl has no CUDA support (it was built "
                                       "without a CUDA compiler): it moves host memory only");
    }
    if (where < 0) {
      host = &b;
      continue;
    }
    device = &b;
    CCL_CHECK(comm->device.ordinal >= 0, cclInvalidUsage,
              std::string(b.name) + " is memory of device " + std::to_string(where) +
                  ", but the communicator has no device (none was current when it was made)");
    CCL_CHECK(where == comm->device.ordinal, cclInvalidUsage,
              std::string(b.name) + " is memory of device " + std::to_string(where) + ", but the communicator's " +
                  "device is " + std::to_string(comm->device.ordinal) + " (cclCommCuDevice)");
  }
  if (!device) return false;
  CCL_CHECK(!host, cclInvalidUsage,
            std::string(device->name) + " is device memory and " + host->name +
                " host memory: one call's buffers must all be in one of them");
  CCL_CHECK(stream, cclInvalidUsage,
            "device buffers need the CUDA stream the call is ordered on; stream is NULL (ccl does not order device "
            "calls on the legacy default stream)");
  CCL_CHECK(!isHostStream(stream), cclInvalidUsage,
            "a host stream (cclHostStreamCreate) cannot order a call on device buffers: pass a CUDA stream");
  // Refused before anything is enqueued, so the caller's capture stays valid. A graph would
  // replay the host steps, tickets, flags and seeds of one call, which the staged link and
  // the bookkeeping of a call cannot take twice.
  CCL_CHECK(!driver->capturing(stream), cclInvalidUsage,
            "the stream is being captured into a CUDA graph, which ccl's device path does not support: make the "
            "call outside the capture");
  return true;
}

void runOnDevice(const DeviceCall& c) { runOnDevice(std::span<const DeviceCall>(&c, 1)); }

void runOnDevice(std::span<const DeviceCall> calls) {
  CCL_CHECK(!calls.empty(), cclInternalError, "runOnDevice: no call");
  cclComm_t comm = calls.front().comm;
  ActiveGuard active(comm);  // first in, last out: an abort waits until the call has left
  DeviceComm& d = deviceState(comm);
  std::lock_guard<std::mutex> lock(d.mutex);
  coll::DeviceRunner& runner = d.runner;
  coll::CurrentDevice current(runner.device());
  std::vector<coll::DeviceRunner::Planned> plans;  // copies: a later call's planning may clear the cache
  size_t scratchBytes = 0;
  std::vector<size_t> scratchAt;
  for (const DeviceCall& c : calls) {
    CCL_CHECK(c.comm == comm && c.stream == calls.front().stream, cclInternalError,
              "runOnDevice: calls of other communicators or streams");
    plans.push_back(planned(d, c, comm->rank, comm->nranks));
    if (plans.back().declined && hasDefaultCodec(comm)) noteUncompressed(comm, cclUncompressedBound);
    scratchAt.push_back(scratchBytes);
    scratchBytes += (plans.back().plan->scratchBytes + 255) & ~size_t{255};
  }
  coll::Stream& caller = runner.caller(static_cast<void*>(calls.front().stream));
  // Failures an earlier call left on this stream are already the communicator's.
  std::string ignored;
  caller.takeError(&ignored);

  beginAsync(comm, &d);  // after the communicator's calls on host streams
  try {
    char* scratch = runner.begin(caller, scratchBytes);
    std::vector<coll::StreamJob> jobs(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      const DeviceCall& c = calls[i];
      // As the host state is: zeroed when the handle is new or last served another operation or size.
      float* residual = c.feedback && plans[i].compressed ? runner.residual(c.feedback->serial, c.feedbackGeneration,
                                                                            c.feedbackFloats, c.opKind, caller)
                                                          : nullptr;
      auto stats = std::make_shared<coll::ExecStats>(statsFor(comm));
      coll::StreamJob& job = jobs[i];
      job.plan = plans[i].plan;
      job.schedule = plans[i].schedule;
      job.buffers = coll::Buffers{c.send, c.recv, scratch + scratchAt[i], residual};
      job.tagBase = c.tagBase;
      job.callSeed = c.tagBase;  // as on host memory: the same codec seeds, the same bytes
      job.stats = stats.get();
      const bool compressed = plans[i].compressed;
      const bool first = i == 0, last = i + 1 == calls.size();
      job.finished = [comm, stats, fn = c.fn, op = c.opKind, compressed, byCost = c.chosenByCost, first, last](
                         cclResult_t r, const std::string& m) {
        if (r == cclSuccess) {
          addStats(comm, op, compressed, byCost, *stats);
        } else if (first) {  // the group's one failure, reported once
          // On CUDA's callback thread: logged here, and kept for the caller's
          // cclGetLastError(comm) (this thread's own last error is no caller's).
          recordError(comm, fn, r, m);
          failAsync(comm, r, std::string(fn) + ": " + m);
        }
        if (last) endAsync(comm);  // last: the communicator may be destroyed from here on
      };
    }
    runner.run(jobs, caller);  // `finished` are its last step
  } catch (const Error& e) {
    // Part of the calls may be enqueued: the communicator cannot be trusted with more work,
    // and the peers' calls must not wait for what this rank will not send.
    if (e.code() != cclRemoteError) runner.link().tellPeers();
    failAsync(comm, e.code());
    endAsync(comm);
    throw;
  } catch (...) {
    runner.link().tellPeers();
    failAsync(comm, cclSystemError);
    endAsync(comm);
    throw;
  }
}

namespace {

bool isP2p(const DeviceCall& c) { return c.kind == coll::Coll::kSend || c.kind == coll::Coll::kRecv; }
bool isSelf(const DeviceCall& c) { return isP2p(c) && c.peer == c.comm->rank; }

// The k-th send of a communicator to itself with its k-th receive from itself (NCCL pairs
// them in order), each pair one call.
std::vector<DeviceCall> selfPairs(const std::vector<DeviceCall>& calls, cclComm_t comm) {
  std::vector<const DeviceCall*> sends, recvs;
  for (const DeviceCall& c : calls)
    if (c.comm == comm && isSelf(c)) (c.kind == coll::Coll::kSend ? sends : recvs).push_back(&c);
  CCL_CHECK(sends.size() == recvs.size(), cclInvalidUsage,
            "the group has " + std::to_string(sends.size()) +
                " sends of device buffers to the calling rank itself and " + std::to_string(recvs.size()) +
                " receives from it");
  std::vector<DeviceCall> pairs;
  for (size_t k = 0; k < sends.size(); ++k) {
    const DeviceCall &s = *sends[k], &r = *recvs[k];
    CCL_CHECK(s.args.count == r.args.count && s.args.dtype == r.args.dtype && s.args.codec.codec == r.args.codec.codec,
              cclInvalidUsage, "a send to the calling rank itself and its receive differ in count, type or codec");
    DeviceCall p = s;
    p.selfPair = true;
    p.recv = r.recv;
    p.key.inPlace = true;  // a pair's plan, never a lone send's
    p.args.misaligned |= r.args.misaligned;
    p.key.misaligned = p.args.misaligned;
    pairs.push_back(p);
  }
  return pairs;
}

}  // namespace

void runDeviceGroup(const std::vector<DeviceCall>& calls) {
  // Per communicator, its collectives in issue order, then its sends and receives in issue
  // order, then its sends to itself paired with their receives: an order every rank gives
  // alike, which a link that matches by order needs.
  std::vector<cclComm_t> comms;
  for (const DeviceCall& c : calls)
    if (std::find(comms.begin(), comms.end(), c.comm) == comms.end()) comms.push_back(c.comm);
  std::vector<std::vector<DeviceCall>> byComm;
  for (cclComm_t comm : comms) {
    std::vector<DeviceCall> mine;
    for (bool p2p : {false, true})
      for (const DeviceCall& c : calls)
        if (c.comm == comm && isP2p(c) == p2p && !isSelf(c)) mine.push_back(c);
    for (DeviceCall& p : selfPairs(calls, comm)) mine.push_back(std::move(p));
    byComm.push_back(std::move(mine));
  }
  if (byComm.size() == 1) return runOnDevice(byComm.front());
  // Several communicators (one thread driving several devices): enqueuing one can wait for
  // its staging to be released, which takes the other ranks' sends, some of them this
  // thread's other communicators'. So each is enqueued on a thread of its own, side by side,
  // and the group ends once all are enqueued; the first failure is the group's.
  std::vector<std::exception_ptr> errors(byComm.size());
  std::vector<std::thread> launchers;
  for (size_t i = 0; i < byComm.size(); ++i)
    launchers.emplace_back([&, i] {
      try {
        runOnDevice(byComm[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (std::thread& t : launchers) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ccl::api
