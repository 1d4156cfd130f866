// SPDX-License-Identifier: BSD-3-Clause
// The host functions of NCCL's device API (nccl_device/*.h). Device communicators, barriers
// and all-to-all slots only exist on the real NCCL communicator; without one these calls
// return ncclInvalidUsage. Team queries describe a host communicator as one rank per
// load-store domain: the world team is the communicator, the LSA team is the rank itself.
#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/real_nccl.h"

namespace ccl::nccl {
namespace {

ncclComm_t requireReal(ncclComm_t comm) {
  ncclComm& c = usable(comm);
  CCL_CHECK(c.real, cclInvalidUsage, "the device API needs NVIDIA's NCCL on a device: " + c.realWhy);
  return c.real;
}

// Team queries cannot report errors; an unusable handle gets the empty team.
ncclComm* queryable(ncclComm_t comm) {
  ncclComm* c = nullptr;
  faceGuard("ncclTeam", [&] { c = &usable(comm); });
  return c;
}

}  // namespace
}  // namespace ccl::nccl

using namespace ccl;
using namespace ccl::nccl;

// The pncclXxx twins of the device API are not declared in NVIDIA's headers: export them here.
#pragma GCC visibility push(default)
extern "C" {

ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm) {
  ncclResult_t r = ncclSuccess;
  ncclResult_t g =
      faceGuard("ncclDevCommCreate", [&] { r = CCL_REAL(ncclDevCommCreate)(requireReal(comm), reqs, outDevComm); });
  return g != ncclSuccess ? g : r;
}

ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclDevCommDestroy, comm, devComm);
  ncclResult_t r = ncclSuccess;
  ncclResult_t g =
      faceGuard("ncclDevCommDestroy", [&] { r = CCL_REAL(ncclDevCommDestroy)(requireReal(comm), devComm); });
  return g != ncclSuccess ? g : r;
}

ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclGinBarrierCreateRequirement, comm, team, nBarriers, outHandle, outReq);
  ncclResult_t r = ncclSuccess;
  ncclResult_t g = faceGuard("ncclGinBarrierCreateRequirement", [&] {
    r = CCL_REAL(ncclGinBarrierCreateRequirement)(requireReal(comm), team, nBarriers, outHandle, outReq);
  });
  return g != ncclSuccess ? g : r;
}

ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq) {
  ncclResult_t r = ncclSuccess;
  ncclResult_t g = faceGuard("ncclLsaBarrierCreateRequirement", [&] {
    r = CCL_REAL(ncclLsaBarrierCreateRequirement)(team, nBarriers, outHandle, outReq);
  });
  return g != ncclSuccess ? g : r;
}

ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq) {
  ncclResult_t r = ncclSuccess;
  ncclResult_t g = faceGuard("ncclLLA2ACreateRequirement",
                             [&] { r = CCL_REAL(ncclLLA2ACreateRequirement)(nBlocks, nSlots, outHandle, outReq); });
  return g != ncclSuccess ? g : r;
}

// 0 slots when the real NCCL is unavailable (this function has no error code).
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  int slots = 0;
  faceGuard("ncclLLA2ACalcSlots", [&] { slots = CCL_REAL(ncclLLA2ACalcSlots)(maxElts, maxEltSize); });
  return slots;
}

ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclTeamWorld, comm);
  ncclComm* c = queryable(comm);
  if (!c) return ncclTeam_t{0, 0, 1};
  if (c->real) return CCL_REAL(ncclTeamWorld)(c->real);
  return ncclTeam_t{c->nranks, c->rank, 1};
}

ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclTeamLsa, comm);
  ncclComm* c = queryable(comm);
  if (!c) return ncclTeam_t{0, 0, 1};
  if (c->real) return CCL_REAL(ncclTeamLsa)(c->real);
  return ncclTeam_t{1, 0, 1};
}

ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclTeamRail, comm);
  ncclComm* c = queryable(comm);
  if (!c) return ncclTeam_t{0, 0, 1};
  if (c->real) return CCL_REAL(ncclTeamRail)(c->real);
  return ncclTeam_t{c->nranks, c->rank, 1};
}

// Rank `rank` of `team`, as a rank of the world team.
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclTeamRankToWorld, comm, team, rank);  // NCCL 2.30 calls it itself
  ncclComm* c = queryable(comm);
  if (!c) return -1;
  if (c->real) return CCL_REAL(ncclTeamRankToWorld)(c->real, team, rank);
  return c->rank + (rank - team.rank) * team.stride;
}

// Rank `rank` of `team`, as a rank of the LSA team (which holds only this rank here).
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  ncclComm* c = queryable(comm);
  if (!c) return -1;
  if (c->real) return CCL_REAL(ncclTeamRankToLsa)(c->real, team, rank);
  return (rank - team.rank) * team.stride;
}

}  // extern "C"
#pragma GCC visibility pop

CCL_NCCL_ALIAS(ncclDevCommCreate)
CCL_NCCL_ALIAS(ncclDevCommDestroy)
CCL_NCCL_ALIAS(ncclGinBarrierCreateRequirement)
CCL_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)
CCL_NCCL_ALIAS(ncclLLA2ACreateRequirement)
CCL_NCCL_ALIAS(ncclLLA2ACalcSlots)
CCL_NCCL_ALIAS(ncclTeamWorld)
CCL_NCCL_ALIAS(ncclTeamLsa)
CCL_NCCL_ALIAS(ncclTeamRail)
CCL_NCCL_ALIAS(ncclTeamRankToWorld)
CCL_NCCL_ALIAS(ncclTeamRankToLsa)
