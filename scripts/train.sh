#!/usr/bin/env bash
# The training step of the main job, one rule for `make up` (scripts/up.sh) and docker
# compose's trainer: train on RECSYS_DATASET when it is set, else on the workspace's own
# events, else (a fresh workspace) on the synthetic demo log; a published model is kept
# unless RECSYS_RETRAIN=1.
#
# Environment: RECSYS_HOME (workspace, default ./workspace), RECSYS_DATASET (a log file or
# `synthetic`), RECSYS_SAMPLER (negative sampler; default: the config's), RECSYS_RETRAIN=1.
# Arguments are passed on to `recsys train` (`--json`: the result as one JSON object).
set -euo pipefail

export RECSYS_HOME="${RECSYS_HOME:-workspace}"

train_args=(--reuse-published)  # a published model is kept unless RECSYS_RETRAIN=1
if [[ -n "${RECSYS_DATASET:-}" ]]; then
    train_args+=(--dataset "${RECSYS_DATASET}")
elif ! compgen -G "${RECSYS_HOME}/events/part-*.parquet" >/dev/null; then
    # a fresh home: the generated demo log, kept apart, trained for at most 4 minutes (early
    # stopping would come after more than ten)
    train_args+=(--dataset synthetic --set train.max_minutes=4)
fi
if [[ -n "${RECSYS_SAMPLER:-}" ]]; then
    train_args+=(--sampler "${RECSYS_SAMPLER}")
fi
echo "train: recsys train ${train_args[*]} (home ${RECSYS_HOME})" >&2
exec recsys train "${train_args[@]}" "$@"
