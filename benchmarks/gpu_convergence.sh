#!/usr/bin/env bash
# Recipe choices trained towards convergence on a GPU (issue 19's study runs on 2 CPU cores
# under a 20- or 30-minute cap; a GPU shows where each recipe's validation curve levels off).
# Full softmax, one process per (dataset, recipe), all at once on one GPU, one CPU thread each,
# default early stopping, capped at $MINUTES minutes of training. Writes each run's --json
# result, stderr log and per-round metrics.csv under $LOGS/<dataset>-<recipe>/. SET=ceiling
# instead trains the defaults (full softmax, three seeds) and `exact` m = 64 (two seeds) on
# amazon-beauty, to see where each levels off.
#   usage: [SET=stage13|stage14|ceiling] benchmarks/gpu_convergence.sh PYTHON DATA_DIR   (DATA_DIR/<dataset>.csv)
set -uo pipefail
PY=$1
DATA=$2
LOGS=${LOGS:-/tmp/gpu-convergence}
MINUTES=${MINUTES:-5}
SET=${SET:-stage13}  # stage13, stage14: recipe choices on both datasets; ceiling: the defaults' seeds
if [ "$SET" = stage13 ]; then
    DATASETS="amazon-beauty amazon-toys"
    declare -A RECIPES=(
        [defaults]=""
        [dropout-0.6]="--set model.dropout=0.6"
        [dropout-0.7]="--set model.dropout=0.7"
        [len-50]="--set model.max_len=50"
        [blocks-1]="--set model.num_layers=1"
    )
elif [ "$SET" = stage14 ]; then
    DATASETS="amazon-beauty amazon-toys"
    declare -A RECIPES=(
        [separate-tables]="--set model.share_embeddings=false"
        [heads-4]="--set model.num_heads=4"
    )
else
    DATASETS="amazon-beauty"
    declare -A RECIPES=(
        [full-seed42]="--sampler full --set train.seed=42"
        [full-seed43]="--sampler full --set train.seed=43"
        [full-seed44]="--sampler full --set train.seed=44"
        [exact_m64-seed42]="--sampler exact --set sampler.num_negatives=64 --set sampler.per_query=true --set train.seed=42"
        [exact_m64-seed43]="--sampler exact --set sampler.num_negatives=64 --set sampler.per_query=true --set train.seed=43"
    )
fi
for dataset in $DATASETS; do
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
