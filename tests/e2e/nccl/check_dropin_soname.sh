#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The drop-in is a library of its own named as NCCL's: its SONAME is libnccl.so.2, a program
# linked against it records NEEDED libnccl.so.2 (not a ccl name), it exports what
# libccl_nccl.so exports, and the program, run with the drop-in's folder on
# LD_LIBRARY_PATH, loads it and gets ccl's answer.
#   check_dropin_soname.sh DROPIN_LIBNCCL_SO_2 PROGRAM LIBCCL_NCCL
set -u
usage="usage: check_dropin_soname.sh DROPIN_LIBNCCL_SO_2 PROGRAM LIBCCL_NCCL"
dropin=${1:?$usage} program=${2:?$usage} ours=${3:?$usage}
status=0
fail() { echo "FAIL: $*"; status=1; }

soname=$(readelf -d "$dropin" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "$dropin: SONAME $soname"
[ "$soname" = libnccl.so.2 ] || fail "the drop-in's SONAME is '$soname', not libnccl.so.2"
[ ! -L "$dropin" ] || fail "$dropin is a link, not a library of its own"

needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "$program: NEEDED $(echo "$needed" | tr '\n' ' ')"
echo "$needed" | grep -qx libnccl.so.2 || fail "the program records no NEEDED libnccl.so.2"
if echo "$needed" | grep -q "^libccl"; then fail "the program records a ccl library: $(echo "$needed" | grep "^libccl")"; fi

exports() { nm -D --defined-only "$1" | awk '{print $3}' | sort; }
differ=$(diff <(exports "$ours") <(exports "$dropin"))
[ -z "$differ" ] || fail "the drop-in and $ours export different symbols:"$'\n'"$differ"

dir=$(dirname "$dropin")
loaded=$(LD_LIBRARY_PATH="$dir" ldd "$program" | awk '$1 == "libnccl.so.2" {print $3}')
echo "libnccl.so.2 => $loaded"
[ "$(readlink -f "$loaded")" = "$(readlink -f "$dropin")" ] || fail "the program loads '$loaded', not the drop-in"
LD_LIBRARY_PATH="$dir" "$program" || fail "the program, run on the drop-in, failed"

[ $status -eq 0 ] && echo "drop-in SONAME and NEEDED: ok"
exit $status
