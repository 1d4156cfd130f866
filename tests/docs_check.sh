#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fails when a README claims, as a blanket statement, that no device has run something: such
# lines went stale as device runs happened (perf/README.md "The first device runs" lists
# them). A claim about one configuration names it without these phrases ("not run on a
# device: NcclLink between ranks on different GPUs"), which the device-run list can answer.
#   tests/docs_check.sh SOURCE_DIR
set -u
root=${1:?usage: docs_check.sh SOURCE_DIR}
phrases='no device has run|has not run on a device|have not run on a device|has run none of it|no GPU has (run|met)|never (ran|run) on a (GPU|device)'
# The tracked READMEs; outside a git checkout, every README but build folders'.
files=$(cd "$root" && git ls-files '*.md' 2>/dev/null)
if [ -n "$files" ]; then
  hits=$(cd "$root" && echo "$files" | xargs grep -nEi "$phrases")
else
  hits=$(grep -rnEi --include='*.md' "$phrases" "$root" | grep -v '/build')
fi
if [ -n "$hits" ]; then
  echo "docs: blanket claims that no device has run something (say which configuration, or update them from the device runs):"
  echo "$hits"
  exit 1
fi
echo "docs: ok"
