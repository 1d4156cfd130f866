// SPDX-License-Identifier: BSD-3-Clause
// Element types, inputs and error bounds of nccl_mpi_test. Like every NCCL-ABI test this
// includes only NVIDIA's nccl.h: it is what a program written for NCCL sees.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl_elements.h"

namespace nccl_mpi {

using nccl_test::get;
using nccl_test::isFloat;
using nccl_test::set;
using nccl_test::typeName;
using nccl_test::typeSize;
// Unit roundoff of a float type (0 for integers).
double unitRoundoff(ncclDataType_t t);

// v as it reads back after a store into t.
double roundTo(ncclDataType_t t, double v);

// A 64-bit hash of (salt, rank, i): the inputs of every rank, computable on every rank.
uint64_t mix(uint64_t salt, uint64_t rank, uint64_t i);

// Integer-valued inputs small enough that every result over up to 8 ranks is exact in each
// type the test uses: prod multiplies at most three 2s (ranks 0-2), avg sums multiples of the
// rank count, sums stay below 40.
double exactInput(ncclRedOp_t op, int nranks, int rank, uint64_t h);
// Distinct small integers (0..199) for collectives that only move data.
double moveInput(uint64_t h);
// A uniform float in [-1, 1) with 24 significant bits, exact in fp32.
double randomInput(uint64_t h);

// Bound of one quantization by `codec` (a CCL_CODEC name) of values whose block absmax is at
// most m, as ccl's cclCodecErrorBound gives it (round to nearest). "none" gives 0. Returns
// false for an unknown name or a codec without an absolute bound (sparsifiers). The one
// place these tests see ccl's own header: the bound is the library's documented contract.
bool quantBound(const std::string& codec, double m, double* bound);

// Whether the run's CCL_COMPRESS lists the collective `kind` (cclOpKindName's spelling:
// "allgather", "broadcast", "alltoall", "send", ...), parsed by ccl's own parser. Unset, it is
// ccl's documented default, the gradient reductions (allreduce, reducescatter): with a codec
// and nothing else, everything else must arrive bit for bit.
bool compressedKind(const char* kind);

}  // namespace nccl_mpi
