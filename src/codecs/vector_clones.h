// SPDX-License-Identifier: BSD-3-Clause
// Run-time choice of instruction set for the hot CPU loops: with GCC on x86-64, a function
// marked CCL_VECTOR_CLONES is compiled for the baseline, AVX2 (x86-64-v3) and AVX-512
// (x86-64-v4), and the loader picks the best the CPU has. The loops are plain C++ that the
// compiler vectorises, so every clone computes the same bits (the codecs library is built
// with -ffp-contract=off: no clone may fuse a multiply-add the others round twice).
// Helpers called from a clone are CCL_ALWAYS_INLINE so they are compiled for its target.
// CCL_CODEC_SPECIALIZE=0 (the CMake option of that name, for builds that only run tests)
// compiles the baseline alone, and the quantizers one loop for every block size.
#pragma once

#ifndef CCL_CODEC_SPECIALIZE
#define CCL_CODEC_SPECIALIZE 1
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__) && CCL_CODEC_SPECIALIZE
#define CCL_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define CCL_VECTOR_CLONES
#endif

#define CCL_ALWAYS_INLINE inline __attribute__((always_inline))
