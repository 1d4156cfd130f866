#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Compares the ncclXxx/pncclXxx exports of libccl_nccl.so with what a user of NCCL needs:
#   check_exported_symbols.sh LIBCCL_NCCL nvidia REAL_LIBNCCL
#     every nccl/pnccl symbol NVIDIA's libnccl.so exports, and no export that is not nccl/pnccl;
#   check_exported_symbols.sh LIBCCL_NCCL list FILE
#     every name in FILE (one per line: what a later NCCL added, nccl_2_32_symbols.txt);
#   check_exported_symbols.sh LIBCCL_NCCL torch
#     every nccl/pnccl symbol PyTorch's libtorch_cuda.so imports, from the environment that
#     scripts/torch_venv.sh makes (CCL_TORCH_VENV, default ~/.cache/ccl/torch-venv).
# Exits 77 (skipped) when the library to compare against is absent; this script installs nothing.
set -u
usage="usage: check_exported_symbols.sh LIBCCL_NCCL nvidia REAL_LIBNCCL | LIBCCL_NCCL list FILE | LIBCCL_NCCL torch"
ours=${1:?$usage}
against=${2:?$usage}

exports() { nm -D --defined-only "$1" | awk '{print $3}' | grep -E '^p?nccl' | sort -u; }
have=$(exports "$ours")
status=0

case "$against" in
  nvidia)
    real=${3:?$usage}
    if [ ! -e "$real" ]; then
      echo "SKIP: $real not found; nothing to compare against"
      exit 77
    fi
    want=$(exports "$real")
    echo "real NCCL exports $(echo "$want" | grep -c .) nccl/pnccl symbols; ccl exports $(echo "$have" | grep -c .)"
    extra=$(comm -13 <(echo "$want") <(echo "$have"))
    if [ -n "$extra" ]; then echo "exported by ccl but not by NCCL (allowed):"; echo "$extra"; fi
    other=$(nm -D --defined-only "$ours" | awk '{print $3}' | grep -vE '^p?nccl' | grep -vE '^_(init|fini)$')
    if [ -n "$other" ]; then echo "exported symbols that are not nccl*/pnccl*:"; echo "$other"; status=1; fi
    ;;
  list)
    file=${3:?$usage}
    want=$(grep -v '^#' "$file" | grep . | sort -u)
    echo "$file lists $(echo "$want" | grep -c .) symbols"
    ;;
  torch)
    venv=${CCL_TORCH_VENV:-$HOME/.cache/ccl/torch-venv}
    lib=$(find "$venv"/lib -path '*/site-packages/torch/lib/libtorch_cuda.so' 2>/dev/null | head -n 1)
    if [ -z "$lib" ]; then
      echo "SKIP: no torch/lib/libtorch_cuda.so under $venv (make the environment with scripts/torch_venv.sh)"
      exit 77
    fi
    # Imported names may carry a version (name@VER); the face's exports carry none.
    want=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' | grep -E '^p?nccl' | sort -u)
    echo "$lib imports $(echo "$want" | grep -c .) nccl/pnccl symbols; ccl exports $(echo "$have" | grep -c .)"
    ;;
  *)
    echo "$usage"
    exit 2
    ;;
esac

missing=$(comm -23 <(echo "$want") <(echo "$have"))
if [ -n "$missing" ]; then echo "missing from $ours:"; echo "$missing"; status=1; fi
[ $status -eq 0 ] && echo "exported symbols: ok"
exit $status
