// SPDX-License-Identifier: BSD-3-Clause
// ncclRedOpCreatePreMulSum / ncclRedOpDestroy: ops live in the communicator's table.
#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/real_nccl.h"

using namespace ccl;
using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  return faceGuard("ncclRedOpCreatePreMulSum", [&] {
    // Any int may come: both are read as ints, and used as enums once checked.
    const ncclDataType_t dtype = checkedDataType(datatype);
    const int where = rawEnum(residence);
    CCL_CHECK(where == ncclScalarDevice || where == ncclScalarHostImmediate, cclInvalidArgument,
              "residence " + std::to_string(where) +
                  " is not an ncclScalarResidence_t (ncclScalarDevice or ncclScalarHostImmediate)");
    ncclComm& c = usable(comm);
    CCL_CHECK(op, cclInvalidArgument, "op is NULL");
    *op = c.ops.create(scalar, dtype, static_cast<ncclScalarResidence_t>(where));
  });
}

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return faceGuard("ncclRedOpDestroy", [&] {
    const ncclRedOp_t made = checkedRedOp(op);  // any int may come: read as one first
    ncclComm& c = handle(comm);
    CCL_CHECK(static_cast<int>(made) >= static_cast<int>(ncclNumOps), cclInvalidArgument,
              "op " + std::to_string(static_cast<int>(made)) + " is a built-in op and cannot be destroyed");
    PreMulSumOp old = c.ops.destroy(made);
    if (old.hasRealOp && c.real) {
      ncclResult_t r = CCL_REAL(ncclRedOpDestroy)(old.realOp, c.real);
      CCL_CHECK(r == ncclSuccess, static_cast<cclResult_t>(r), "the real NCCL refused to destroy its twin op");
    }
  });
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclRedOpCreatePreMulSum)
CCL_NCCL_ALIAS(ncclRedOpDestroy)
