#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fails when a test file's path does not name what it tests. The rule (tests/unit/CMakeLists.txt):
# the test of src/<dir>/<file> is tests/unit/<dir>/<file>_test.<ext>, or
# tests/unit/<dir>/<file>_<aspect>_test.<ext> for one aspect of it; a test of a whole folder is
# named after the folder (tests/unit/<dir>/<folder>_test.cc for src/<dir>/<folder>/). One naming
# rule everywhere: <name>_test.<ext>, never test_<name>.
#
# The exceptions, whose tests drive the library as a user does rather than one source file:
#   tests/e2e      the public C API, every collective, compression, processes, the NCCL face
#   tests/faults   the fault campaign's pieces
#   tests/abi      ccl's declarations of CUDA's and NCCL's ABI against the real headers
#   tests/harness  the shared test support and its own tests
#   tests/gpu_kit  what the device kit runs on a lent GPU
# Files in tests/unit not named *_test.* are helpers of the tests beside them.
#   tests/check_test_paths.sh SOURCE_DIR
set -u
root=${1:?usage: check_test_paths.sh SOURCE_DIR}
exceptions=(e2e faults abi harness gpu_kit)
status=0
cd "$root" || exit 2
# Nothing named the other way, anywhere.
while IFS= read -r f; do
  echo "$f: named test_*; the rule is <name>_test.<ext>"
  status=1
done < <(find tests -type f -name 'test_*')
# Every test file is under unit/ or an exception folder.
while IFS= read -r f; do
  top=${f#tests/}
  top=${top%%/*}
  case " unit ${exceptions[*]} " in
    *" $top "*) ;;
    *)
      echo "$f: a test outside tests/unit and the exception folders (${exceptions[*]})"
      status=1
      ;;
  esac
done < <(find tests -type f -name '*_test.*')
# Every unit test names a source file or folder of its mirror in src/.
while IFS= read -r f; do
  rel=${f#tests/unit/}
  dir=$(dirname "$rel")
  stem=$(basename "$rel")
  stem=${stem%_test.*}
  found=""
  while [ -n "$stem" ]; do
    if [ -d "src/$dir/$stem" ] || compgen -G "src/$dir/$stem.*" > /dev/null; then
      found=$stem
      break
    fi
    [[ $stem == *_* ]] || break
    stem=${stem%_*}
  done
  if [ -z "$found" ]; then
    echo "$f: names no file or folder of src/$dir (the test of src/$dir/X is tests/unit/$dir/X_test.<ext>)"
    status=1
  fi
done < <(find tests/unit -type f -name '*_test.*')
[ $status -eq 0 ] && echo "every test file names what it tests ($(find tests/unit -type f -name '*_test.*' | wc -l) unit tests)"
exit $status
