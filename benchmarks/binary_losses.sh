#!/usr/bin/env bash
# Do the binary losses (negative sampling, NCE) learn in this model, and when?
# The synthetic demo log (recsys train --dataset synthetic: 2,000 users, 1,000 items, planted
# successors), uniform negatives, 8 epochs, one thread each, default model; one JSON line per
# run in benchmarks/results/sampler_sweep/binary_losses_synthetic.jsonl (kept runs skipped).
# Usage: bash benchmarks/binary_losses.sh [scratch dir, default /tmp/binary-losses]
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-/tmp/binary-losses}
out=benchmarks/results/sampler_sweep/binary_losses_synthetic.jsonl
mkdir -p "$scratch" && touch "$out"
# loss, m, per_query, temperature
runs=(
  "sampled_softmax 64 false 0.05" "negative_sampling 64 false 0.05" "nce 64 false 0.05"
  "negative_sampling 64 false 0.2" "negative_sampling 64 false 1.0"
  "negative_sampling 1 false 0.05" "negative_sampling 8 false 0.05"
  "negative_sampling 1 true 0.05" "negative_sampling 8 true 0.05" "negative_sampling 64 true 0.05"
  "nce 8 true 0.05"
)
for run in "${runs[@]}"; do
  read -r loss m per_query tau <<<"$run"
  name="$loss-m$m-perquery_$per_query-tau$tau"
  grep -q "\"name\": \"$name\"" "$out" && continue
  OMP_NUM_THREADS=1 .venv/bin/recsys train --home "$scratch/$name" --dataset synthetic \
    --sampler uniform --num-negatives "$m" --set sampler.per_query="$per_query" \
    --set loss.name="$loss" --set model.temperature="$tau" --set train.threads=1 \
    --set train.patience=8 --max-epochs 8 --json 2>"$scratch/$name.log" |
    .venv/bin/python -c "
import json, sys
r = json.load(sys.stdin)
print(json.dumps({'name': '$name', 'loss': '$loss', 'm': $m, 'per_query': '$per_query' == 'true',
                  'temperature': $tau, 'epochs': r['epochs'],
                  'val_ndcg@10': r['metrics']['val']['ndcg@10'],
                  'test_ndcg@10': r['metrics']['test']['ndcg@10'],
                  'seconds_per_epoch': r['seconds_per_epoch']}))" >>"$out"
  tail -n 1 "$out"
done
