// SPDX-License-Identifier: BSD-3-Clause
// NVIDIA's nccl.h (and the host part of its device API), plus what 2.29-2.30 added, with every
// declaration exported, so that the definitions in this folder carry NCCL's exact signatures.
// CUDA headers are used for types only; nothing here links against CUDA.
#pragma once

#pragma GCC visibility push(default)
#include <nccl.h>
#include <nccl_device/core.h>
#include <nccl_device/gin_barrier.h>
#include <nccl_device/ll_a2a.h>
#include <nccl_device/lsa_barrier.h>

#include "nccl/nccl_2_30.h"
#include "nccl/nccl_2_32.h"
#pragma GCC visibility pop

// Each function is implemented as pncclXxx; ncclXxx is a weak alias of it, as NCCL does, so
// a profiler that defines ncclXxx and calls pncclXxx still reaches the implementation.
#define CCL_NCCL_ALIAS(name) extern "C" __typeof__(p##name) name __attribute__((weak, alias("p" #name)));
