#!/usr/bin/env bash
# Recipe choices trained towards convergence on a GPU (issue 19's study runs on 2 CPU cores
# under a 20- or 30-minute cap; a GPU shows where each recipe's validation curve levels off).
# Full softmax, one process per (dataset, recipe), all at once on one GPU, one CPU thread each,
# default early stopping, capped at $MINUTES minutes of training. Writes each run's --json
# result, stderr log and per-round metrics.csv under $LOGS/<dataset>-<recipe>/.
#   usage: benchmarks/gpu_convergence.sh PYTHON DATA_DIR   (DATA_DIR/<dataset>.csv)
set -uo pipefail
PY=$1
DATA=$2
LOGS=${LOGS:-/tmp/gpu-convergence}
MINUTES=${MINUTES:-5}
declare -A RECIPES=(
    [defaults]=""
    [dropout-0.6]="--set model.dropout=0.6"
    [dropout-0.7]="--set model.dropout=0.7"
    [len-50]="--set model.max_len=50"
    [blocks-1]="--set model.num_layers=1"
)
for dataset in amazon-beauty amazon-toys; do
    for recipe in "${!RECIPES[@]}"; do
        run="$LOGS/$dataset-$recipe"
        mkdir -p "$run"
        # shellcheck disable=SC2086  # the recipe's flags are meant to split
        "$PY" -m app -v train --home "$run/home" --dataset "$DATA/$dataset.csv" --sampler full \
            --set train.accelerator=gpu --set train.threads=1 \
            --set train.max_minutes="$MINUTES" ${RECIPES[$recipe]} --json \
            >"$run/result.json" 2>"$run/stderr.log" &
    done
done
wait
for run in "$LOGS"/*/; do
    cp "$run"home/runs/*/metrics.csv "$run" 2>/dev/null || echo "no metrics: $run"
done
