// SPDX-License-Identifier: BSD-3-Clause
// The api's device path: a call whose buffers are memory of the communicator's device runs
// on the stream executor, ordered on the caller's stream, and returns once enqueued (NCCL's
// semantics). Compute steps are the device's kernels (the CUDA codecs and element-wise
// kernels); transfers go through the staged transport: each wave's sends are copied into
// host staging memory on the device's stream, exchanged over the communicator's own
// transport, and the receives copied back. Error feedback keeps its residual in device
// memory. What the device is comes from coll::deviceDriver() (CUDA, or a simulated device in
// the tests).
//
// One communicator's device calls run one after another in the order they were issued,
// whatever stream each was given: a call's stream waits for the previous call's end, as
// NCCL orders the calls of a communicator. Host calls of the same communicator wait for its
// device calls on the host (api/group.h, drainAsync). A group's device calls are enqueued
// together at cclGroupEnd (runDeviceGroup).
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/comm.h"
#include "api/compression.h"
#include "collectives/algorithms/algorithms.h"

namespace ccl::api {

// A buffer argument of a call, by the name messages give it.
struct NamedBuffer {
  const char* name;
  const void* ptr;  // NULL: not used by this call
};

// False when the call's buffers are host memory, true when they are memory of the
// communicator's device. Throws cclInvalidUsage for a mix of host and device memory, for
// memory of another device, for device memory with a host stream or with stream NULL, and
// for device memory in a build without CUDA or a communicator without a device.
bool onDevice(cclComm_t comm, std::initializer_list<NamedBuffer> buffers, cclStream_t stream);

// The buffers as the device driver sees them ("sendbuff 0x...: memory type 0, device -1; ..."),
// for the message of a call that passed a CUDA stream with buffers taken for host memory.
std::string describeBuffers(std::initializer_list<NamedBuffer> buffers);

struct DeviceCall {
  coll::Coll kind;
  const char* fn;
  cclComm_t comm;
  coll::CollArgs args;  // this rank's; codec none when uncompressed
  int peer = -1;        // send and recv
  // A send to the calling rank itself with its receive (paired in a group): one job whose
  // plan is the send's and the receive's, reading `send` and writing `recv`.
  bool selfPair = false;
  const void* send = nullptr;
  void* recv = nullptr;
  cclStream_t stream = nullptr;
  cclFeedback* feedback = nullptr;      // residual kind, or null
  uint64_t feedbackGeneration = 0;      // AutoFeedback::Slot's: a new one zeroes the residual
  AutoFeedback::Taken feedbackTaken{};  // the step's position taken (Op::feedbackTaken)
  size_t feedbackFloats = 0;
  int opKind = 0;
  bool chosenByCost = false;  // the cost model chose its algorithm (cclStats_t.autoChosen)
  PlanKey key{};
  uint64_t tagBase = 0;
};

// True when the communicator's device link would run `call` uncompressed: its codec's
// streams at their bound are not smaller than its data (coll::DeviceRunner::plan). The plan
// is made (and cached) on the way, as the call's run would make it.
bool declinedOnDevice(const DeviceCall& call);

// Enqueues `call` on its stream and returns. Failures found while enqueuing throw; later
// ones become the communicator's asynchronous error (cclCommGetAsyncError).
void runOnDevice(const DeviceCall& call);
// Calls of one communicator and stream enqueued as one group (coll::executeOnStream of
// several jobs), in the order given.
void runOnDevice(std::span<const DeviceCall> calls);
// The device calls of a group (cclGroupEnd): per communicator, collectives then sends and
// receives, each in issue order.
void runDeviceGroup(const std::vector<DeviceCall>& calls);

// What the communicator's device calls have enqueued on CUDA streams so far (cclStats_t's
// deviceCommands and deviceHostFunctions); zeros before its first device call.
struct DeviceCounts {
  unsigned long long commands = 0, hostFunctions = 0;
};
DeviceCounts deviceCounts(cclComm_t comm);

}  // namespace ccl::api
