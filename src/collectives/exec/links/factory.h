// SPDX-License-Identifier: BSD-3-Clause
// The links a communicator's device calls move bytes over, by the names CCL_DEVICE_TRANSPORT
// takes: one table (factory.cc), as transport/factory.cc is for transports. The stream
// executor itself knows only StreamLink.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "collectives/exec/device.h"
#include "collectives/exec/stream_executor.h"
#include "transport/nccl/nccl_transport.h"
#include "transport/transport.h"

namespace ccl::coll {

// What a link is made of; each link takes the parts it needs.
struct LinkParts {
  transport::Transport* transport = nullptr;   // the communicator's ccl transport
  transport::nccl::Transport* nccl = nullptr;  // NVIDIA's communicator, where one was made
  std::chrono::milliseconds timeout{0};        // CCL_TIMEOUT, for waits on the host
  const std::atomic<bool>* aborted = nullptr;  // the communicator's abort flag
};

// True when `name` is a link of the table; linkNames() lists them for messages.
bool isLinkName(const std::string& name);
std::string linkNames();
// Whether the link needs NVIDIA's NCCL communicator (made at the communicator's init).
bool linkNeedsNccl(const std::string& name);
// The link `name` for calls on `device`. Throws Error(cclInvalidArgument) for an unknown name
// and Error(cclInternalError) when a part it needs is missing.
std::unique_ptr<StreamLink> makeLink(const std::string& name, const LinkParts& parts, Device& device);

}  // namespace ccl::coll
