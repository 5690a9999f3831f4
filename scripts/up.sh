#!/usr/bin/env bash
# The main job (`make up`; make has installed the project): train on the default data when the
# workspace has no published model (or when RECSYS_RETRAIN=1; scripts/train.sh, which docker
# compose's trainer runs too), then serve it over HTTP. New logs later:
# `recsys retrain --logs new.csv` (the running server switches by itself).
#
# Environment: RECSYS_HOME (workspace, default ./workspace), RECSYS_PORT (default 8000),
# RECSYS_HOST (default 127.0.0.1), RECSYS_DATASET (a log file or `synthetic`; default: the
# workspace's events, else the synthetic demo log), RECSYS_SAMPLER (negative sampler),
# RECSYS_RETRAIN=1; the server's other RECSYS_* settings (docs/guides/serving.md).
set -euo pipefail

export RECSYS_HOME="${RECSYS_HOME:-workspace}"
export RECSYS_PORT="${RECSYS_PORT:-8000}"

bash "$(dirname "${BASH_SOURCE[0]}")/train.sh"

echo "up: serving on port ${RECSYS_PORT}; try: curl 'localhost:${RECSYS_PORT}/recommend?user_id=u1&k=5'" >&2
exec recsys serve --port "${RECSYS_PORT}"
