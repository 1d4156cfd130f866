#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fails when libccl_nccl.so lacks an ncclXxx/pncclXxx symbol that NVIDIA's libnccl.so
# exports. Exits 77 (skipped) when the real library is absent.
set -u
ours=${1:?usage: check_exported_symbols.sh LIBCCL_NCCL REAL_LIBNCCL}
real=${2:?usage: check_exported_symbols.sh LIBCCL_NCCL REAL_LIBNCCL}
if [ ! -e "$real" ]; then
  echo "SKIP: $real not found; nothing to compare against"
  exit 77
fi
symbols() { nm -D --defined-only "$1" | awk '{print $3}' | grep -E '^p?nccl' | sort -u; }
want=$(symbols "$real")
have=$(symbols "$ours")
missing=$(comm -23 <(echo "$want") <(echo "$have"))
extra=$(comm -13 <(echo "$want") <(echo "$have"))
other=$(nm -D --defined-only "$ours" | awk '{print $3}' | grep -vE '^p?nccl' | grep -vE '^_(init|fini)$')
echo "real NCCL exports $(echo "$want" | grep -c .) nccl/pnccl symbols; ccl exports $(echo "$have" | grep -c .)"
status=0
if [ -n "$missing" ]; then echo "missing from $ours:"; echo "$missing"; status=1; fi
if [ -n "$extra" ]; then echo "exported by ccl but not by NCCL (allowed):"; echo "$extra"; fi
if [ -n "$other" ]; then echo "exported symbols that are not nccl*/pnccl*:"; echo "$other"; status=1; fi
[ $status -eq 0 ] && echo "exported symbols: ok"
exit $status
