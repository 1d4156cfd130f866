// Helpers of the NCCL-ABI tests. These tests include only NVIDIA's nccl.h: they are what a
// program written for NCCL sees, whichever library serves the calls.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace nccl_test {

// Runs body(rank, comm) on `n` threads, each a rank of one new communicator made with
// ncclCommInitRankConfig(config) (NULL: ncclCommInitRank); destroys the communicators after.
void runRanks(int n, const std::function<void(int rank, ncclComm_t comm)>& body, ncclConfig_t* config = nullptr);

// Runs body(rank) on `n` threads and joins them.
void runThreads(int n, const std::function<void(int rank)>& body);

// Every data type NCCL 2.28 defines.
const std::vector<ncclDataType_t>& allTypes();
const char* typeName(ncclDataType_t t);
size_t typeSize(ncclDataType_t t);
bool isFloat(ncclDataType_t t);

// Element i of a buffer of type t, as a double / set from a double (rounded as CUDA's
// host conversions round; integers wrap as C++ conversions do).
double get(ncclDataType_t t, const void* buf, size_t i);
void set(ncclDataType_t t, void* buf, size_t i, double v);

// A buffer of `count` elements of `t` holding f(i).
std::vector<unsigned char> filled(ncclDataType_t t, size_t count, const std::function<double(size_t)>& f);

// Waits, with a deadline, until the non-blocking communicator is ready; returns its state.
ncclResult_t waitReady(ncclComm_t comm);

}  // namespace nccl_test
