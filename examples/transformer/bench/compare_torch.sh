#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# compare_torch.sh TEXT [THREADS] [ROUNDS]: training tokens/s of one rank of gpt_train
# against the same GPT in PyTorch eager (bench/torch_gpt.py), alternating A B, B A, ... in
# one run, with the same threads and configuration (6 layers, d_model 256, 8 heads,
# sequence 256, micro-batch 8, fp32). Needs torch from PyPI (pip install torch).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
text=${1:?usage: compare_torch.sh TEXT [THREADS] [ROUNDS]}
threads=${2:-2}
rounds=${3:-3}
train=${GPT_TRAIN:-$here/../../../build/examples/transformer/gpt_train}
python=${PYTHON:-python3}
config=(--layers 6 --channels 256 --heads 8 --seq 256 --batch 8)
steps=20
ours() {
  OMP_NUM_THREADS=$threads "$train" --data "$text" "${config[@]}" --max-seq 256 --steps $((steps + 3)) \
    --threads "$threads" --no-progress --val-seqs 8 --log /dev/stdout |
    "$python" -c 'import json,sys
r=[json.loads(l) for l in sys.stdin if l.startswith("{")]
s=[x for x in r if x["type"]=="step"][3:]
print(sum(x["tokens_per_s"] for x in s)/len(s))'
}
theirs() {
  OMP_NUM_THREADS=$threads "$python" "$here/torch_gpt.py" --data "$text" "${config[@]}" --steps $steps \
    --threads "$threads" | sed -E 's/.*: ([0-9.]+) tokens.*/\1/'
}
echo "config: ${config[*]}, $threads threads, $steps timed steps after 3 warm-up steps"
for ((r = 0; r < rounds; ++r)); do
  if ((r % 2 == 0)); then a=$(ours); b=$(theirs); else b=$(theirs); a=$(ours); fi
  printf 'round %d: gpt_train %.0f tokens/s, PyTorch eager %.0f tokens/s, ratio %.2f\n' "$r" "$a" "$b" \
    "$(echo "$a / $b" | bc -l)"
done
