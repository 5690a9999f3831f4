#!/usr/bin/env bash
# The main job (`make up`; make has installed the project): train on the default data when the
# workspace has no published model (or when RECSYS_RETRAIN=1), then serve it over HTTP. New
# logs later: `recsys retrain --logs new.csv` (the running server switches by itself).
#
# Environment: RECSYS_HOME (workspace, default ./workspace), RECSYS_PORT (default 8000),
# RECSYS_HOST (default 127.0.0.1), RECSYS_DATASET (a log file or `synthetic`; default: the
# workspace's events, else the synthetic demo log), RECSYS_SAMPLER (negative sampler),
# RECSYS_RETRAIN=1.
set -euo pipefail

export RECSYS_HOME="${RECSYS_HOME:-workspace}"
export RECSYS_PORT="${RECSYS_PORT:-8000}"

train_args=(--reuse-published)  # a published model is kept unless RECSYS_RETRAIN=1
if [[ -n "${RECSYS_DATASET:-}" ]]; then
    train_args+=(--dataset "${RECSYS_DATASET}")
elif ! compgen -G "${RECSYS_HOME}/events/part-*.parquet" >/dev/null; then
    train_args+=(--dataset synthetic)  # a fresh home: the generated demo log, kept apart
fi
[[ -n "${RECSYS_SAMPLER:-}" ]] && train_args+=(--sampler "${RECSYS_SAMPLER}")
echo "up: recsys train ${train_args[*]} (home ${RECSYS_HOME})" >&2
recsys train "${train_args[@]}"

echo "up: serving on port ${RECSYS_PORT}; try: curl 'localhost:${RECSYS_PORT}/recommend?user_id=u1&k=5'" >&2
exec recsys serve --port "${RECSYS_PORT}"
