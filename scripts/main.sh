#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job on a fresh machine: install what is missing, build, and train the reference
# GPT on the King James Bible with 4 data-parallel ranks over ccl for a couple of minutes,
# its gradients compressed (int8 in blocks of 32, with error feedback), then show the validation loss against
# the text's unigram entropy, raw against wire bytes, a generated sample and the plots.
# Flags given to this script go to gpt_train after the demo's own (a later flag wins).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${BUILD_DIR:-$root/build}
BUILD_DIR=$build "$root/scripts/build.sh"
train=$build/examples/transformer/gpt_train
[ -x "$train" ] || { echo "main.sh: $train was not built (see the cmake output)" >&2; exit 1; }

out=$build/demo
mkdir -p "$out"
text=$out/kjv.txt
[ -s "$text" ] || bible -f gen1:1-rev22:21 > "$text"   # all 31,102 verses, public domain

echo "== training: 4 data-parallel ranks (threads) x 1 thread, gradients int8 (blocks of 32) + error feedback"
OMP_NUM_THREADS=1 "$train" --data "$text" --layers 4 --channels 128 --heads 4 --max-seq 128 --seq 128 --batch 4 \
  --ranks 4 --threads 1 --steps 1500 --lr 2e-3 --warmup 50 --val-every 250 --codec int8 --codec-block 32 --feedback ef \
  --log "$out/demo.jsonl" --checkpoint "$out/demo.ck" --sample 300 "$@"
/usr/bin/python3 "$root/examples/transformer/scripts/plot.py" --out "$out/plots" "int8+ef=$out/demo.jsonl" >/dev/null
echo "== plots: $out/plots/{loss,val_loss,bytes}.png   log: $out/demo.jsonl   checkpoint: $out/demo.ck"
