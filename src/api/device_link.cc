// SPDX-License-Identifier: BSD-3-Clause
// The link of a communicator's device calls: CCL_DEVICE_TRANSPORT resolved (NVIDIA's NCCL or
// the staged link), NVIDIA's NCCL loaded and its communicator made over ccl's bootstrap, or
// one borrowed from the NCCL face; and the cost model device calls are priced with.
#include "api/device_link.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "api/comm.h"
#include "collectives/exec/links/factory.h"
#include "common/config.h"
#include "common/log.h"

namespace ccl::api {

namespace {
std::atomic<bool> gDeviceLinkLent{false};
}  // namespace

void deviceLinksAreLent() { gDeviceLinkLent.store(true); }

std::shared_ptr<const coll::CostModel> deviceModel(const coll::CostModel& host, const std::string& link) {
  coll::CostModel m = host;
  m.compute = coll::measuredDeviceCompute();
  m.streamsAtBound = coll::linkNeedsNccl(link);
  return std::make_shared<const coll::CostModel>(m);
}

// CCL_DEVICE_TRANSPORT=auto: NVIDIA's NCCL ("nccl") where every rank can make a communicator
// of it, else "staged". A rank can when its device's driver runs NVIDIA's NCCL (CUDA's), the
// library loads (CCL_NCCL_LIBRARY), and no other rank has the same GPU (same host and
// device: NVIDIA's NCCL refuses two ranks on one GPU). Where the NCCL face lends its own
// communicator (deviceLinksAreLent) none is made: staged until it is borrowed. Collective:
// every rank decides from the same exchanged facts, so all decide alike.
static std::string resolveAutoLink(cclComm& comm) {
  coll::DeviceDriver* driver = coll::deviceDriver();
  if (!driver || gDeviceLinkLent.load()) return "staged";  // alike on every rank of a process's build
  struct Can {
    int can;
    int device;
    uint64_t host;
  };
  std::vector<Can> all(static_cast<size_t>(comm.nranks));
  Can& mine = all[static_cast<size_t>(comm.rank)];
  mine = Can{0, comm.device.ordinal, comm.placement.hostId};
  std::string why = "its device's driver (" + std::string(driver->name()) + ") does not run NVIDIA's NCCL";
  if (comm.device.ordinal < 0) {
    why = "it has no device";
  } else if (driver->runsNccl()) {
    try {
      transport::nccl::load(config::ncclLibrary());
      mine.can = 1;
    } catch (const Error& e) {
      why = e.what();
    }
  }
  comm.links.bootstrap->allGather(all.data(), sizeof(Can));
  for (int r = 0; r < comm.nranks; ++r) {
    const Can& c = all[static_cast<size_t>(r)];
    if (!c.can) {
      CCL_INFO("comm rank %d: device calls staged through host memory (CCL_DEVICE_TRANSPORT=auto): rank %d %s",
               comm.rank, r, r == comm.rank ? why.c_str() : "cannot use NVIDIA's NCCL");
      return "staged";
    }
    for (int q = 0; q < r; ++q)
      if (all[static_cast<size_t>(q)].host == c.host && all[static_cast<size_t>(q)].device == c.device) {
        CCL_INFO(
            "comm rank %d: device calls staged through host memory (CCL_DEVICE_TRANSPORT=auto): ranks %d and %d "
            "share a GPU, which NVIDIA's NCCL refuses",
            comm.rank, q, r);
        return "staged";
      }
  }
  return "nccl";
}

std::unique_ptr<transport::nccl::Transport> deviceNccl(cclComm& comm) {
  std::string& mode = comm.device.link;
  CCL_CHECK(mode == "auto" || coll::isLinkName(mode), cclInvalidArgument,
            "CCL_DEVICE_TRANSPORT is '" + mode + "'; it takes auto, " + coll::linkNames());
  if (mode == "auto") mode = resolveAutoLink(comm);
  if (!coll::linkNeedsNccl(mode) || comm.device.ordinal < 0) return nullptr;
  // NCCL makes its communicator on the current device: this rank's, not the thread's.
  std::unique_ptr<coll::Device> device = coll::deviceDriver()->open(comm.device.ordinal);
  coll::CurrentDevice current(*device);
  transport::nccl::Functions fn;
  std::string why;
  try {
    fn = transport::nccl::load(config::ncclLibrary());
  } catch (const Error& e) {
    why = e.what();
  }
  std::vector<int> loaded(static_cast<size_t>(comm.nranks), 0);
  loaded[static_cast<size_t>(comm.rank)] = why.empty() ? 1 : 0;
  comm.links.bootstrap->allGather(loaded.data(), sizeof(int));
  CCL_CHECK(why.empty(), cclSystemError, "CCL_DEVICE_TRANSPORT=nccl: " + why);
  for (int r = 0; r < comm.nranks; ++r)
    CCL_CHECK(loaded[static_cast<size_t>(r)], cclSystemError,
              "CCL_DEVICE_TRANSPORT=nccl: rank " + std::to_string(r) + " could not load NVIDIA's NCCL");
  auto t = std::make_unique<transport::nccl::Transport>(fn, *comm.links.bootstrap);
  CCL_INFO("comm rank %d: device calls over NVIDIA's NCCL (%s)", comm.rank, fn.library.c_str());
  return t;
}

void borrowDeviceNccl(cclComm_t comm, std::unique_ptr<transport::nccl::Transport> link) {
  CCL_CHECK(!comm->device.calls, cclInternalError, "borrowDeviceNccl after the communicator's first device call");
  if (comm->device.ordinal < 0) return;  // no device path (a build without CUDA): nothing to move
  comm->device.nccl = std::move(link);
  comm->device.link = "nccl";
  if (comm->tuning.costModel) comm->tuning.deviceCostModel = deviceModel(*comm->tuning.costModel, comm->device.link);
  CCL_INFO("comm rank %d: device calls over a borrowed NCCL communicator", comm->rank);
}

}  // namespace ccl::api
