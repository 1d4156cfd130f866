#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# expect_failure.sh REGEX COMMAND [ARGS...]: passes when COMMAND exits non-zero (but was not
# killed by a signal) and its output matches REGEX.
set -u
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -eq 0 ]; then echo "expect_failure: the command succeeded" >&2; exit 1; fi
if [ $rc -ge 128 ]; then echo "expect_failure: the command died with signal $((rc - 128))" >&2; exit 1; fi
if ! printf '%s\n' "$out" | grep -qE -- "$regex"; then echo "expect_failure: no line matches '$regex'" >&2; exit 1; fi
