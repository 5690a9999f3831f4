#!/usr/bin/env bash
# Checks on a machine with a CUDA GPU (CI has none): the sampler contract suite and the
# chunked full softmax's tests with their tensors on the GPU (RECSYS_TEST_DEVICE=cuda); then
# `recsys train` on the GPU (train.accelerator=gpu) with every sampler over a small synthetic
# log, evaluation and export included; the full softmax once more in item chunks
# (loss.full_chunk), validating every 20 steps; a warm retrain. Prints one line per check
# and exits non-zero if any failed; logs go to $LOGS (default /tmp/gpu-check).
#   usage: scripts/gpu-check.sh [python]   (the python that has the project's requirements)
set -uo pipefail
PY=${1:-python3}
LOGS=${LOGS:-/tmp/gpu-check}
mkdir -p "$LOGS"
failed=0
check() {  # check NAME COMMAND...: run it, log its output, report the outcome
    local name=$1; shift
    local start=$SECONDS
    if "$@" >"$LOGS/$name.log" 2>&1; then
        echo "ok    $name ($((SECONDS - start)) s)"
    else
        echo "FAIL  $name ($((SECONDS - start)) s): tail of $LOGS/$name.log"
        tail -n 15 "$LOGS/$name.log" | sed 's/^/      /'
        failed=1
    fi
}

"$PY" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print(torch.__version__, torch.cuda.get_device_name(0))' || exit 1
check contract env RECSYS_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    tests/training/test_samplers_contract.py tests/training/test_full_softmax.py
check synth "$PY" -m app synth --users 400 --items 300 --events 12000 --out "$LOGS/log.csv"
for sampler in full exact uniform popularity in-batch mixed quadratic rff midx tapas bernoulli; do
    check "train-$sampler" "$PY" -m app -v train --home "$LOGS/home-$sampler" \
        --dataset "$LOGS/log.csv" --sampler "$sampler" --max-epochs 2 \
        --set train.accelerator=gpu --set train.val_users=200 --json
done
check train-full-chunked "$PY" -m app -v train --home "$LOGS/home-full-chunked" \
    --dataset "$LOGS/log.csv" --sampler full --max-epochs 2 --set loss.full_chunk=64 \
    --set train.val_every_steps=20 --set train.accelerator=gpu --set train.val_users=200 --json
check synth-new "$PY" -m app synth --users 500 --items 350 --events 3000 --seed 1 --out "$LOGS/new.csv"
check retrain "$PY" -m app -v retrain --home "$LOGS/home-full" --logs "$LOGS/new.csv" \
    --max-epochs 1 --set train.accelerator=gpu --json
grep -ho '"device": "[^"]*"' "$LOGS"/train-*.log | sort | uniq -c  # where they trained
exit $failed
