#!/usr/bin/env bash
# Smoke test of docker-compose.yml, for real: build the image, `compose up` the file unchanged
# on a free host port, wait for the api's healthcheck, ask /ready, GET and POST /recommend and
# /similar, run the documented retrain (`compose run --rm trainer recsys retrain --logs
# /logs/new.csv`, with --json) on new logs, read the gate's decision from its JSON and check the
# outcome it states (published: the api switches to that version within a bounded wait; kept
# out: the api keeps the old one), then stop (the api must exit cleanly) and `down -v`. Prints
# each stage's time and the image size, and writes them as a record (RECSYS_SMOKE_RECORD,
# default benchmarks/results/compose_smoke/smoke.json); exit 0 only when all held.
#
# The decision is certain by construction: every user of the new logs ends with two events on
# items the first model has never seen, so each of the gate's validation rows (the users with
# new events, the first model having been refit on its own validation events) targets an item
# that model cannot score. The candidate cannot be worse on any row, the interval's upper end is
# >= 0, and the gate publishes; a refusal fails the run, naming the gate's reason.
#
# The engine, its preparation and the environment it reads: scripts/smoke-lib.sh, which runs
# the prepare, build and data stages.
set -euo pipefail
SMOKE_NAME=smoke
COMPOSE_FILES=(docker-compose.yml)
# shellcheck source=scripts/smoke-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/smoke-lib.sh"
RECORD="${RECSYS_SMOKE_RECORD:-$ROOT/benchmarks/results/compose_smoke/smoke.json}"

# --------------------------------------------------------------------------------------- up
stage up
log "compose up -d on host port $PORT (project $PROJECT)"
compose up -d >"$TMP/up.log" 2>&1 || { tail -30 "$TMP/up.log" >&2; die "compose up failed"; }
deadline=$(($(date +%s) + TIMEOUT))
wait_trainer "$deadline"
done_stage train

stage healthy
api=""
while [[ -z "$api" ]]; do
    [[ $(date +%s) -lt $deadline ]] || { cat "$TMP/up.log" >&2; die "no api container"; }
    api=$(container api); sleep 1
done
wait_healthy "$api" "$deadline"
log "api healthy"
done_stage healthy

# ----------------------------------------------------------------------------------- checks
stage checks
BASE="http://127.0.0.1:$PORT"
check "GET /ready" 'r["status"] == "ready" and r["model_version"] == r["published_version"]' "$BASE/ready"
V1=$(curl -sf "$BASE/ready" | python3 -c 'import json, sys; print(json.load(sys.stdin)["model_version"])')
check "GET /recommend" 'len(r["items"]) == 5 and r["strategy"] == "model"' \
    "$BASE/recommend?user_id=$USER_ID&k=5"
check "POST /recommend" 'len(r["items"]) == 5 and not r["warnings"]' -X POST "$BASE/recommend" \
    -H 'content-type: application/json' -d "{\"items\": [\"$ITEM_A\", \"$ITEM_B\"], \"k\": 5}"
check "GET /similar" 'r["item_id"] == "'"$ITEM_A"'" and len(r["items"]) == 5' "$BASE/similar/$ITEM_A?k=5"
done_stage checks

# ---------------------------------------------------------------------------------- retrain
stage retrain
log "compose run --rm trainer recsys retrain --logs /logs/new.csv --json"
compose run --rm trainer recsys retrain --logs /logs/new.csv --json >"$TMP/retrain.json" \
    2>"$TMP/retrain.log" || { tail -30 "$TMP/retrain.log" >&2; die "retrain failed"; }
# its log's last lines (stdout holds the JSON alone)
tail -n 3 "$TMP/retrain.log" | while read -r line; do log "  $line"; done
read_decision "$TMP/retrain.json"
log "gate: $DECISION; published: $PUBLISHED ($REASON)"
[[ "$OLD_VERSION" == "$V1" ]] || die "the retrain was gated against $OLD_VERSION, the api served $V1"
served() { curl -sf --max-time 10 "$BASE/ready" | python3 -c 'import json, sys; print(json.load(sys.stdin)["model_version"])'; }
T_DECIDED=$(date +%s)
if [[ "$PUBLISHED" == true ]]; then
    # the api polls models/CURRENT every RECSYS_RELOAD_INTERVAL (5 s): a bounded wait
    until V2=$(served) && [[ "$V2" == "$NEW_VERSION" ]]; do
        [[ $(date +%s) -lt $((T_DECIDED + SWITCH_WAIT)) ]] \
            || die "the api serves ${V2:-nothing} ${SWITCH_WAIT}s after $NEW_VERSION was published"
        sleep 1
    done
    SWITCHED=$(($(date +%s) - T_DECIDED))
    log "api switched model_version: $V1 -> $V2 (${SWITCHED}s after the retrain)"
    check "GET /similar (new item)" 'r["item_id"] == "i-new-0" and r["items"]' "$BASE/similar/i-new-0?k=5"
    check "GET /recommend (new model)" 'r["model_version"] == "'"$V2"'"' "$BASE/recommend?user_id=$USER_ID&k=5"
else
    # kept out: the old version must stay served (several poll intervals), then the run fails
    while [[ $(date +%s) -lt $((T_DECIDED + SWITCH_WAIT)) ]]; do
        now=$(served) || die "/ready failed while $V1 should stay served"
        [[ "$now" == "$V1" ]] || die "the gate kept $NEW_VERSION out, yet the api serves $now"
        sleep 2
    done
    log "api kept model_version $V1 for ${SWITCH_WAIT}s: the candidate $NEW_VERSION was kept out"
    die "the gate refused a candidate that cannot be worse on any row (each targets an item new to $V1): $REASON"
fi
done_stage retrain

# ------------------------------------------------------------------------------------- down
stage down
compose stop >"$TMP/stop.log" 2>&1 || { cat "$TMP/stop.log" >&2; die "compose stop failed"; }
code=$("$ENGINE" inspect -f '{{.State.ExitCode}}' "$api")
"$ENGINE" logs "$api" >"$TMP/api.log" 2>&1 || true
grep -q -i 'shutting down\|finished server process' "$TMP/api.log" \
    || { tail -10 "$TMP/api.log" >&2; die "the api did not shut down cleanly (exit $code)"; }
[[ "$code" == 0 ]] || die "the api exited $code on stop (killed?)"
log "api stopped cleanly (exit 0)"
compose down -v >"$TMP/down.log" 2>&1 || { cat "$TMP/down.log" >&2; die "compose down -v failed"; }
left=$("$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT")
[[ -z "$left" ]] || die "containers left after down: $left"
done_stage down

log "image $IMAGE: $((SIZE / 1000000)) MB"
summary
write_record() {  # the stage times, the image's size and the switch as the run's record
    local figures="$TMP/figures.txt" py="$ROOT/.venv/bin/python"; [[ -x "$py" ]] || py=python3
    { printf '%s\n' "${STAGE_SECONDS[@]}"
      echo "image_mb=$((SIZE / 1000000))"; echo "base_image_mb=$((BASE_SIZE / 1000000))"
      echo "switch_after_retrain_s=$SWITCHED"; echo "config.engine=$ENGINE"
      echo "config.dataset=$cut events for the first model, $NEW_EVENTS new ($USERS users, $ITEMS items)"
      echo "config.gate=$DECISION"; } >"$figures"
    "$py" "$ROOT/scripts/smoke_record.py" --timings "$figures" --out "$RECORD" \
        --wall-seconds "$(since "$T_ALL")" --load-before "$SMOKE_LOAD_BEFORE" 2>"$TMP/record.log" \
        || { cat "$TMP/record.log" >&2; die "could not write the record $RECORD"; }
    log "record: $RECORD"
}
write_record
log "PASS"
