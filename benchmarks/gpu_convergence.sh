#!/usr/bin/env bash
# Recipe choices trained towards convergence on a GPU (issue 19's study runs on 2 CPU cores
# under a 20- or 30-minute cap; a GPU shows where each recipe's validation curve levels off).
# One process per (dataset, recipe), all at once on one GPU, one CPU thread each, default
# early stopping, capped at $MINUTES minutes of training. Writes each run's --json result,
# stderr log and per-round metrics.csv under $LOGS/<dataset>-<recipe>/.
#   SET=stage13 (default): recipe choices, full softmax, both datasets;
#   SET=stage14: two more choices, likewise;
#   SET=ceiling: the defaults (full softmax, three seeds) and `exact` m = 64 (two seeds) on
#   amazon-beauty, to see where each levels off.
#   usage: [SET=...] [MINUTES=5] [LOGS=DIR] benchmarks/gpu_convergence.sh PYTHON DATA_DIR
#          (DATA_DIR/<dataset>.csv; the committed runs: MINUTES=4, 2.1 and 3.2 respectively)
set -uo pipefail
USAGE="usage: [SET=stage13|stage14|ceiling] $0 PYTHON DATA_DIR"
PY=${1:?$USAGE}
DATA=${2:?$USAGE}
LOGS=${LOGS:-/tmp/gpu-convergence}
MINUTES=${MINUTES:-5}
SET=${SET:-stage13}
FULL="--sampler full"
EXACT="--sampler exact --set sampler.num_negatives=64 --set sampler.per_query=true"
declare -A RECIPES
case "$SET" in
stage13)
    DATASETS="amazon-beauty amazon-toys"
    RECIPES=(
        [defaults]="$FULL"
        [dropout-0.6]="$FULL --set model.dropout=0.6"
        [dropout-0.7]="$FULL --set model.dropout=0.7"
        [len-50]="$FULL --set model.max_len=50"
        [blocks-1]="$FULL --set model.num_layers=1"
    ) ;;
stage14)
    DATASETS="amazon-beauty amazon-toys"
    RECIPES=(
        [separate-tables]="$FULL --set model.share_embeddings=false"
        [heads-4]="$FULL --set model.num_heads=4"
    ) ;;
ceiling)
    DATASETS="amazon-beauty"
    RECIPES=(
        [full-seed42]="$FULL --set train.seed=42"
        [full-seed43]="$FULL --set train.seed=43"
        [full-seed44]="$FULL --set train.seed=44"
        [exact_m64-seed42]="$EXACT --set train.seed=42"
        [exact_m64-seed43]="$EXACT --set train.seed=43"
    ) ;;
*)
    echo "unknown SET=$SET; $USAGE" >&2
    exit 2 ;;
esac
declare -A PIDS
for dataset in $DATASETS; do
    for recipe in "${!RECIPES[@]}"; do
        run="$LOGS/$dataset-$recipe"
        mkdir -p "$run"
        # shellcheck disable=SC2086  # the recipe's flags are meant to split
        "$PY" -m app -v train --home "$run/home" --dataset "$DATA/$dataset.csv" \
            --set train.accelerator=gpu --set train.threads=1 \
            --set train.max_minutes="$MINUTES" ${RECIPES[$recipe]} --json \
            >"$run/result.json" 2>"$run/stderr.log" &
        PIDS[$run]=$!
    done
done
failed=0
for run in "${!PIDS[@]}"; do
    if ! wait "${PIDS[$run]}"; then
        echo "FAILED: $run (tail of its stderr.log below)" >&2
        tail -n 5 "$run/stderr.log" >&2
        failed=1
        continue
    fi
    version=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
        "$run/result.json")
    cp "$run/home/runs/$version/metrics.csv" "$run/"
done
exit $failed
