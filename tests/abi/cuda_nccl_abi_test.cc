// SPDX-License-Identifier: BSD-3-Clause
// Every part of CUDA's and NCCL's ABI that ccl declares by hand instead of including the
// vendor's header, against the real headers: values, sizes, alignments and offsets. A struct
// ccl declares smaller than the runtime writes is a stack overwrite on every call
// (cudaPointerAttributes grew by 64 bytes in CUDA 13), so sizes must match the largest
// version accepted, which is the toolkit this is built with.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "common/cuda_abi.h"
#include "transport/nccl/nccl_transport.h"

namespace {

namespace cabi = ccl::cuda::abi;
namespace nabi = ccl::transport::nccl;

TEST(CudaAbi, ValuesAreTheRuntimes) {
  EXPECT_EQ(cabi::kSuccess, static_cast<int>(cudaSuccess));
  EXPECT_EQ(cabi::kMemcpyDefault, static_cast<int>(cudaMemcpyDefault));
  EXPECT_EQ(cabi::kErrorInsufficientDriver, static_cast<int>(cudaErrorInsufficientDriver));
  EXPECT_EQ(cabi::kMemoryTypeDevice, static_cast<int>(cudaMemoryTypeDevice));
  EXPECT_EQ(cabi::kMemoryTypeManaged, static_cast<int>(cudaMemoryTypeManaged));
  EXPECT_EQ(cabi::kStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
  EXPECT_EQ(reinterpret_cast<cudaStream_t>(cabi::kStreamLegacy), cudaStreamLegacy);
}

TEST(CudaAbi, PointerAttributesIsLaidOutAsTheRuntimes) {
  using Ours = cabi::PointerAttributes;
  using Theirs = cudaPointerAttributes;
  EXPECT_EQ(sizeof(Ours), sizeof(Theirs));
  EXPECT_EQ(alignof(Ours), alignof(Theirs));
  EXPECT_EQ(offsetof(Ours, type), offsetof(Theirs, type));
  EXPECT_EQ(offsetof(Ours, device), offsetof(Theirs, device));
  EXPECT_EQ(offsetof(Ours, devicePointer), offsetof(Theirs, devicePointer));
  EXPECT_EQ(offsetof(Ours, hostPointer), offsetof(Theirs, hostPointer));
  EXPECT_EQ(sizeof(Ours::type), sizeof(Theirs::type));
}

TEST(CudaAbi, TheRuntimesLoadedAreTheVersionsOfTheseHeaders) {
  // The table names runtimes up to the version of the headers it was checked against: a
  // newer runtime may have grown a struct again.
  const int major = CUDART_VERSION / 1000;
  EXPECT_EQ(std::string(cabi::kRuntimeNames[0]), "libcudart.so." + std::to_string(major));
}

TEST(NcclAbi, ValuesAndTypesAreNcclsOwn) {
  EXPECT_EQ(nabi::kSuccess, static_cast<int>(ncclSuccess));
  EXPECT_EQ(nabi::kInProgress, static_cast<int>(ncclInProgress));
  EXPECT_EQ(nabi::kUint8, static_cast<int>(ncclUint8));
  EXPECT_EQ(sizeof(nabi::UniqueId), sizeof(ncclUniqueId));
  EXPECT_EQ(alignof(nabi::UniqueId), alignof(ncclUniqueId));
  EXPECT_EQ(sizeof(nabi::Comm), sizeof(ncclComm_t));
  EXPECT_EQ(sizeof(nabi::Stream), sizeof(cudaStream_t));
  // The transport calls NCCL's functions through int-returning pointers with int arguments
  // where NCCL has enums: the same registers only if the enums are int-sized.
  EXPECT_EQ(sizeof(ncclResult_t), sizeof(int));
  EXPECT_EQ(sizeof(ncclDataType_t), sizeof(int));
  EXPECT_TRUE((std::is_same_v<decltype(ncclSend(nullptr, 0, ncclUint8, 0, nullptr, nullptr)), ncclResult_t>));
}

}  // namespace
