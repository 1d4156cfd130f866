// SPDX-License-Identifier: BSD-3-Clause
// The stream executor's link over NVIDIA's NCCL (CCL_DEVICE_TRANSPORT=nccl, and the NCCL
// face's compressed runner): the only part of the executor that knows NCCL.
#pragma once

#include <span>
#include <vector>

#include "collectives/exec/stream.h"
#include "collectives/exec/stream_executor.h"
#include "transport/nccl/nccl_transport.h"

namespace ccl::coll {

// A stream link over a real NCCL communicator: a wave is ncclGroupStart, one
// ncclSend/ncclRecv per transfer at its posted size, ncclGroupEnd, on the stream's device
// handle. The lengths of encoded streams stay in device memory: receivers decode from the
// stream's own header.
class NcclLink final : public StreamLink {
 public:
  explicit NcclLink(transport::nccl::Transport& t) : t_(t) {}
  void group(std::span<const Transfer> transfers, Stream& stream) override;
  bool exactLengths() const override { return false; }

 private:
  transport::nccl::Transport& t_;
  std::vector<transport::nccl::Op> ops_;
};

}  // namespace ccl::coll
