#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fails when a source file includes a header of a higher layer (DESIGN.md section 1), or when
# inside collectives/ exec/ and the folders that build and describe plans include each other.
# Layer order, lowest first: common, transport, codecs, collectives, api, nccl.
set -u
src=${1:?usage: check_layers.sh SRC_DIR}
layers=(common transport codecs collectives api nccl)
status=0
for i in "${!layers[@]}"; do
  dir=$src/${layers[$i]}
  [ -d "$dir" ] || continue
  for j in "${!layers[@]}"; do
    [ "$j" -gt "$i" ] || continue
    hits=$(grep -rnE "#include +\"${layers[$j]}/" "$dir" 2>/dev/null)
    if [ -n "$hits" ]; then
      echo "layer ${layers[$i]} includes the higher layer ${layers[$j]}:"
      echo "$hits"
      status=1
    fi
  done
done
# transport and codecs are siblings: neither may see the other.
for pair in "transport codecs" "codecs transport"; do
  set -- $pair
  hits=$(grep -rnE "#include +\"$2/" "$src/$1" 2>/dev/null)
  if [ -n "$hits" ]; then echo "layer $1 includes its sibling $2:"; echo "$hits"; status=1; fi
done
# Inside collectives: algorithms/ builds plans and plan/ describes them; neither runs them, so
# neither includes exec/; and exec/ runs plans it is given, so it never includes algorithms/.
coll=$src/collectives
for dir in algorithms plan; do
  hits=$(grep -rnE '#include +"collectives/exec/' "$coll/$dir" 2>/dev/null)
  if [ -n "$hits" ]; then echo "collectives/$dir includes collectives/exec:"; echo "$hits"; status=1; fi
done
hits=$(grep -rnE '#include +"collectives/algorithms/' "$coll/exec" 2>/dev/null)
if [ -n "$hits" ]; then echo "collectives/exec includes collectives/algorithms:"; echo "$hits"; status=1; fi
[ $status -eq 0 ] && echo "layers: ok"
exit $status
