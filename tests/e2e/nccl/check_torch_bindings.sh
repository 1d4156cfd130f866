#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Imports torch and torch.distributed with libccl_nccl.so preloaded and asks the dynamic
# loader (LD_DEBUG=bindings) where each nccl/pnccl symbol of libtorch_cuda.so was bound: every
# one must go to ccl, none to the NCCL that torch brings (found through its RPATH). LD_BIND_NOW
# binds every symbol at load, not only those the import happens to call.
#   check_torch_bindings.sh LIBCCL_NCCL
# The environment is the one scripts/torch_venv.sh makes (CCL_TORCH_VENV, default
# ~/.cache/ccl/torch-venv). Exits 77 (skipped) when it has no torch; this script installs nothing.
set -u
ours=${1:?usage: check_torch_bindings.sh LIBCCL_NCCL}
venv=${CCL_TORCH_VENV:-$HOME/.cache/ccl/torch-venv}
lib=$(find "$venv"/lib -path '*/site-packages/torch/lib/libtorch_cuda.so' 2>/dev/null | head -n 1)
if [ ! -x "$venv/bin/python" ] || [ -z "$lib" ]; then
  echo "SKIP: no python with torch/lib/libtorch_cuda.so under $venv (make the environment with scripts/torch_venv.sh)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! LD_PRELOAD="$ours" LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld" OMP_NUM_THREADS=1 \
  "$venv/bin/python" -c 'import torch, torch.distributed' >"$work/out" 2>&1; then
  echo "importing torch with $ours preloaded failed:"
  cat "$work/out"
  exit 1
fi

# Lines read: "<pid>: binding file <from> [0] to <to> [0]: normal symbol `<name>'".
bindings=$(cat "$work"/ld.* | awk '$2 == "binding" && $4 ~ /\/libtorch_cuda\.so$/ && $11 ~ /^`p?nccl/ {
  name = $11; gsub(/[`'"'"']/, "", name); print name, $7 }' | sort -u)
want=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' | grep -E '^p?nccl' | sort -u)
bound=$(echo "$bindings" | awk 'NF {print $1}' | sort -u)
ourReal=$(readlink -f "$ours")
elsewhere=$(echo "$bindings" | while read -r name to; do
  [ -n "$name" ] && [ "$(readlink -f "$to")" != "$ourReal" ] && echo "$name -> $to"
done)
unbound=$(comm -23 <(echo "$want") <(echo "$bound"))

echo "$lib imports $(echo "$want" | grep -c .) nccl/pnccl symbols; the loader bound $(echo "$bound" | grep -c .)"
status=0
if [ -n "$elsewhere" ]; then echo "bound to a library other than $ours:"; echo "$elsewhere"; status=1; fi
if [ -n "$unbound" ]; then echo "no binding seen for:"; echo "$unbound"; status=1; fi
[ $status -eq 0 ] && echo "every nccl symbol of libtorch_cuda.so binds to ccl: ok"
exit $status
