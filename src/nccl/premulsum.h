// SPDX-License-Identifier: BSD-3-Clause
// ncclRedOpCreatePreMulSum ops: each communicator keeps a table of the ops created on it;
// op values start at ncclNumOps. On host buffers a PreMulSum reduction multiplies the
// local input by the scalar (in the element type's arithmetic, rounded once) into a scratch
// buffer and sums that; on device buffers the real NCCL gets an equivalent op of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ccl/ccl.h"
#include "nccl/nccl_abi.h"

namespace ccl::nccl {

struct PreMulSumOp {
  bool live = false;
  ncclDataType_t dtype = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  unsigned char value[8] = {};      // host-immediate scalar, copied at creation
  const void* pointer = nullptr;    // ncclScalarDevice: read when each collective runs
  ncclRedOp_t realOp = ncclNumOps;  // the real NCCL's twin, made on first device use
  bool hasRealOp = false;
};

class PreMulSumTable {
 public:
  ncclRedOp_t create(const void* scalar, ncclDataType_t dtype, ncclScalarResidence_t residence);
  // Returns the op (throws Error(cclInvalidArgument) for an op not of this table).
  PreMulSumOp get(ncclRedOp_t op) const;
  void setRealOp(ncclRedOp_t op, ncclRedOp_t real);
  // Removes `op`; returns it so the caller can destroy its real twin.
  PreMulSumOp destroy(ncclRedOp_t op);

 private:
  mutable std::mutex mutex_;
  std::vector<PreMulSumOp> ops_;
};

// Bytes of one element of `dtype` (0 when invalid).
size_t elementSize(ncclDataType_t dtype);

// The host input of a reduction with `op`: `send` itself for built-in ops, or a scratch
// buffer that `scale` fills with the input pre-multiplied by the op's scalar, with cclSum as
// the op to run. `scale` reads the input and the scalar (of ncclScalarDevice: through its
// pointer) when it runs, so the caller runs it when the reduction runs, at once or at the
// outermost group end: NCCL reads both when the collective runs, and inside a group that is
// at its end (a plain op's input is read there too).
struct ReductionInput {
  const void* send = nullptr;
  cclRedOp_t op = cclSum;
  std::shared_ptr<void> scratch;  // keeps the pre-multiplied copy alive
  std::function<void()> scale;    // empty for built-in ops
};
ReductionInput prepareReduction(const PreMulSumTable& table, ncclRedOp_t op, ncclDataType_t dtype, const void* send,
                                size_t count);

}  // namespace ccl::nccl
