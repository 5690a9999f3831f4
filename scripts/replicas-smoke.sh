#!/usr/bin/env bash
# Smoke test of deploy/compose.replicas.yml, for real: the trainer once, RECSYS_SMOKE_REPLICAS
# (3) api replicas behind the balancer, and bounded load through the balancer on loopback
# (scripts/replicas_probe.py: GET and POST /recommend in turn at a fixed rate, a fixed request
# count and time) while, one after another: one replica's process is SIGKILLed and compose's
# restart policy brings it back; events for a user are posted to a second replica and that
# user's recommendations read from a third (and through the balancer) until they change; a
# retrain (`compose run --rm trainer recsys retrain --logs /logs/new.csv --json`, a certain
# publish, as in compose-smoke.sh) is published and every replica's /ready watched until all
# serve it. Writes a record (benchmarks/results/replicas/, the project's schema): requests,
# failures by status, p50/p99, time until the killed replica is ready again, until every
# replica serves the new version after the publish (models/CURRENT's mtime), until the events
# show through another replica. Exit 0 only with no failed client request, every replica on the
# new version within 2 reload intervals of the publish, and every bounded wait met.
#
# The balancer: the compose file's nginx image when it is present or can be pulled; else a
# stand-in built from the base image with Debian's nginx (1.22), whose start script points
# `resolver` at the container's own DNS server (podman's is not Docker's 127.0.0.11) and drops
# the upstream's `resolve` flag (open-source nginx 1.27.3 on), so `api` is resolved once, at
# start. The kill: podman counts `podman kill` as a stop by the user (no restart), so with
# podman the replica's main process is SIGKILLed from the host, as a crash or the OOM killer
# would; with Docker, `docker kill -s KILL`. With podman, an override also drops the api's
# depends_on: podman-compose makes it a hard dependency on the trainer's container, and podman
# does not restart a container whose dependency has exited.
#
# Environment: scripts/smoke-lib.sh's, and RECSYS_SMOKE_REPLICAS (3), RECSYS_SMOKE_RATE (20
# requests a second), RECSYS_SMOKE_REQUESTS (12000), RECSYS_SMOKE_LOAD_SECONDS (600),
# RECSYS_SMOKE_WAIT (bound on each wait, 180 s), RECSYS_SMOKE_RECORD (the record's path).
set -euo pipefail
SMOKE_NAME=replicas
COMPOSE_FILES=(docker-compose.yml deploy/compose.replicas.yml)
REPLICAS="${RECSYS_SMOKE_REPLICAS:-3}"
RATE="${RECSYS_SMOKE_RATE:-20}"
MAX_REQUESTS="${RECSYS_SMOKE_REQUESTS:-12000}"
LOAD_SECONDS="${RECSYS_SMOKE_LOAD_SECONDS:-600}"
WAIT="${RECSYS_SMOKE_WAIT:-180}"
INTERVAL=5  # RECSYS_RELOAD_INTERVAL of the replicas
TOKEN="smoke-token-$$"
# shellcheck source=scripts/smoke-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/smoke-lib.sh"
RECORD="${RECSYS_SMOKE_RECORD:-$ROOT/benchmarks/results/replicas/replicas.json}"
PY="$ROOT/.venv/bin/python"; [[ -x "$PY" ]] || PY=python3
COMPOSE_ENV+=(RECSYS_ADMIN_TOKEN="$TOKEN" RECSYS_RELOAD_INTERVAL="$INTERVAL")
FIGURES="$TMP/figures.txt"
fig() { printf '%s=%s\n' "$1" "$2" >>"$FIGURES"; }
now() { date +%s.%N; }
ip_of() { "$ENGINE" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }
json_get() { python3 -c 'import json, sys; r = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
version_at() { curl -sf --max-time 3 "http://$1/ready" | grep -o '"model_version":"[^"]*"' | cut -d'"' -f4; }
recs_at() { curl -sf --max-time 5 "$1/recommend?user_id=$USER_ID&k=10" \
    | json_get '",".join(i["item_id"] for i in r["items"])'; }

# ---------------------------------------------------------------------------------- balancer
stage balancer
NGINX_IMAGE=$(sed -n 's/^ *image: *//p' deploy/compose.replicas.yml | head -1)
BALANCER="$NGINX_IMAGE"
OVERRIDE=()
if [[ "$ENGINE" == podman ]]; then
    # podman-compose turns depends_on into --requires: a replica whose trainer has exited is
    # never restarted by its policy. Without it the replicas start with the trainer and answer
    # 503 until its publish (the healthcheck waits for that).
    OVERRIDE+=('  api:' '    depends_on: !reset {}')
fi
if ! "$ENGINE" image inspect "$NGINX_IMAGE" >/dev/null 2>&1 \
    && ! timeout 60 "$ENGINE" pull -q "docker.io/library/$NGINX_IMAGE" >/dev/null 2>&1; then
    BALANCER=localhost/recsys-smoke-balancer:latest
    log "no registry answers for $NGINX_IMAGE: building $BALANCER (Debian's nginx)"
    mkdir -p "$STATE/balancer-context"
    cat >"$STATE/balancer-context/start.sh" <<'EOF'
#!/bin/sh
# deploy/nginx.conf for nginx 1.22: this network's DNS server, `api` resolved at start.
ns=$(awk '/^nameserver/ {print $2; exit}' /etc/resolv.conf)
sed -e "s/resolver 127\.0\.0\.11/resolver $ns/" -e 's/ resolve;/;/' /etc/nginx/nginx.conf >/tmp/nginx.conf
exec nginx -c /tmp/nginx.conf -g 'daemon off;'
EOF
    cat >"$STATE/balancer-context/Containerfile" <<EOF
FROM docker.io/library/$BASE_IMAGE
RUN apt-get update -q && apt-get install -y -q --no-install-recommends nginx-light \\
    && rm -rf /var/lib/apt/lists/*
COPY start.sh /start.sh
CMD ["sh", "/start.sh"]
EOF
    "$ENGINE" build -q --network host -t "$BALANCER" "$STATE/balancer-context" >"$TMP/balancer-build.log" 2>&1 \
        || { tail -20 "$TMP/balancer-build.log" >&2; die "could not build the balancer stand-in"; }
    OVERRIDE+=('  balancer:' "    image: $BALANCER")
fi
if [[ ${#OVERRIDE[@]} -gt 0 ]]; then
    printf '%s\n' services: "${OVERRIDE[@]}" >"$TMP/override.yml"
    COMPOSE_FILE_ARGS+=(-f "$TMP/override.yml")
    log "override: $(tr '\n' ' ' <"$TMP/override.yml")"
fi
fig config.balancer "$BALANCER"
done_stage balancer

# --------------------------------------------------------------------------------------- up
stage up
log "compose up -d --scale api=$REPLICAS on host port $PORT (project $PROJECT)"
compose up -d --scale "api=$REPLICAS" >"$TMP/up.log" 2>&1 \
    || { tail -30 "$TMP/up.log" >&2; die "compose up failed"; }
deadline=$(($(date +%s) + TIMEOUT))
wait_trainer "$deadline"
done_stage train

stage healthy
mapfile -t APIS < <(containers api)
[[ ${#APIS[@]} -eq $REPLICAS ]] || die "${#APIS[@]} api containers, wanted $REPLICAS"
for c in "${APIS[@]}"; do wait_healthy "$c" "$deadline"; done
declare -a ADDR=()
for c in "${APIS[@]}"; do ADDR+=("$(ip_of "$c"):8000"); done
BASE="http://127.0.0.1:$PORT"
until curl -sf --max-time 3 "$BASE/ready" >/dev/null; do
    [[ $(date +%s) -lt $deadline ]] || die "the balancer does not answer /ready on $BASE"
    sleep 1
done
log "$REPLICAS replicas healthy at ${ADDR[*]}; the balancer answers on $BASE"
done_stage healthy

stage checks
for a in "${ADDR[@]}"; do
    check "GET /ready ($a)" 'r["status"] == "ready"' "http://$a/ready"
done
check "GET /recommend (balancer)" 'len(r["items"]) == 10' "$BASE/recommend?user_id=$USER_ID&k=10"
V1=$(version_at "127.0.0.1:$PORT")
read -r USERS_CSV ITEMS_CSV < <(python3 - "$TMP/datasets/events.csv" <<'EOF'
import collections, csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
users = [u for u, _ in collections.Counter(r["user_id"] for r in rows).most_common(30)]
items = [i for i, _ in collections.Counter(r["item_id"] for r in rows).most_common(30)]
print(",".join(users), ",".join(items))
EOF
)
done_stage checks

# --------------------------------------------------------------------------------- the load
stage load
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
T_LOAD=$(date +%s.%N)
"$PY" "$ROOT/scripts/replicas_probe.py" load --base "$BASE" --users "$USERS_CSV" \
    --items "$ITEMS_CSV" --rate "$RATE" --requests "$MAX_REQUESTS" --seconds "$LOAD_SECONDS" \
    --stop "$TMP/stop" --out "$TMP/load.json" 2>"$TMP/load.log" &
LOAD_PID=$!
sleep 10

# kill one replica; compose's restart policy starts it again
VICTIM=${APIS[0]}
log "SIGKILL replica $VICTIM (${ADDR[0]})"
T0=$(now)
if [[ "$ENGINE" == podman ]]; then
    kill -KILL "$(podman inspect -f '{{.State.Pid}}' "$VICTIM")"
else
    docker kill -s KILL "$VICTIM" >/dev/null
fi
sleep 1
until a=$(ip_of "$VICTIM") && [[ -n "$a" ]] && [[ "$(version_at "$a:8000" 2>/dev/null)" == "$V1" ]]; do
    [[ $(since "$T0" | cut -d. -f1) -lt $WAIT ]] \
        || die "the killed replica is not ready ${WAIT}s after the kill ($("$ENGINE" inspect -f '{{.State.Status}}' "$VICTIM"))"
    sleep 0.25
done
BACK=$(since "$T0")
fig killed_replica_ready_s "$BACK"
fig killed_replica_restarts "$("$ENGINE" inspect -f '{{.RestartCount}}' "$VICTIM")"
fig killed_replica_address_kept "$([[ "$a:8000" == "${ADDR[0]}" ]] && echo true || echo false)"
ADDR[0]="$a:8000"
log "killed replica ready again after ${BACK}s (address $a)"
sleep 5

# events for USER_ID to replica 2; read from replica 3 and through the balancer
BEFORE=$(recs_at "http://${ADDR[2]}")
body=$(python3 -c 'import json, sys, time
u, items = sys.argv[1], sys.argv[2].split(",")[:3]
print(json.dumps({"events": [{"user_id": u, "item_id": i, "timestamp": int(time.time()) + n}
                             for n, i in enumerate(items)]}))' "$USER_ID" "$BEFORE")
T0=$(now)
curl -sf --max-time 10 -X POST "http://${ADDR[1]}/events" -H "Authorization: Bearer $TOKEN" \
    -H 'content-type: application/json' -d "$body" >"$TMP/events.json" || die "POST /events failed"
fig events_post_s "$(since "$T0")"
[[ "$(recs_at "http://${ADDR[1]}")" != "$BEFORE" ]] || die "the replica that took the events answers as before"
other="" balanced=""
while [[ -z "$other" || -z "$balanced" ]]; do
    [[ -n "$other" || "$(recs_at "http://${ADDR[2]}")" == "$BEFORE" ]] || other=$(since "$T0")
    [[ -n "$balanced" || "$(recs_at "$BASE")" == "$BEFORE" ]] || balanced=$(since "$T0")
    [[ $(since "$T0" | cut -d. -f1) -lt $WAIT ]] || die "the events do not show through ${ADDR[2]} after ${WAIT}s"
    sleep 0.25
done
fig events_other_replica_s "$other"
fig events_balancer_s "$balanced"
log "events posted to ${ADDR[1]} show through ${ADDR[2]} after ${other}s, the balancer after ${balanced}s"

# publish under load: the retrain in the background, every replica's version watched
CURRENT="$("$ENGINE" volume inspect -f '{{.Mountpoint}}' "${PROJECT}_workspace")/models/CURRENT"
T0=$(now)
compose run --rm trainer recsys retrain --logs /logs/new.csv --json >"$TMP/retrain.json" \
    2>"$TMP/retrain.log" &
RETRAIN_PID=$!
declare -a FIRST_NEW=()
RETRAIN_RC=""
while [[ -z "$RETRAIN_RC" || ${#FIRST_NEW[@]} -lt $REPLICAS ]]; do
    if [[ -z "$RETRAIN_RC" ]] && ! kill -0 "$RETRAIN_PID" 2>/dev/null; then
        RETRAIN_RC=0; wait "$RETRAIN_PID" || RETRAIN_RC=$?
        [[ $RETRAIN_RC == 0 ]] || { tail -20 "$TMP/retrain.log" >&2; die "retrain failed"; }
        fig retrain_s "$(since "$T0")"
        read_decision "$TMP/retrain.json"
        [[ "$PUBLISHED" == true ]] || die "the gate kept the candidate out: $REASON"
    fi
    for n in "${!ADDR[@]}"; do
        [[ -z "${FIRST_NEW[$n]:-}" ]] || continue
        v=$(version_at "${ADDR[$n]}" 2>/dev/null || true)
        [[ -z "$v" || "$v" == "$V1" ]] || FIRST_NEW[n]=$(now)
    done
    [[ $(since "$T0" | cut -d. -f1) -lt $TIMEOUT ]] \
        || die "not every replica serves a new version ${TIMEOUT}s after the retrain began"
    sleep 0.25
done
PUBLISH=$(stat -c %.3Y "$CURRENT" 2>/dev/null) || die "cannot read $CURRENT's time"
ALL=$(printf '%s\n' "${FIRST_NEW[@]}" | sort -n | tail -1)
for a in "${ADDR[@]}"; do [[ "$(version_at "$a")" == "$NEW_VERSION" ]] || die "$a does not serve $NEW_VERSION"; done
fig publish_to_every_replica_s "$(python3 -c "print(round($ALL - $PUBLISH, 2))")"
FIRST=$(printf '%s\n' "${FIRST_NEW[@]}" | sort -n | head -1)
fig publish_to_first_replica_s "$(python3 -c "print(round($FIRST - $PUBLISH, 2))")"
log "gate: $DECISION; $V1 -> $NEW_VERSION; every replica on it $(python3 -c "print(round($ALL - $PUBLISH, 2))")s after the publish"
sleep 10
touch "$TMP/stop"
wait "$LOAD_PID" || die "the load driver failed: $(tail -5 "$TMP/load.log")"
done_stage load

# ----------------------------------------------------------------------------------- record
stage record
{ fig config.replicas "$REPLICAS"; fig config.reload_interval_s "$INTERVAL"; fig config.engine "$ENGINE"
  fig config.dataset "$USERS users, $ITEMS items, $EVENTS events (synthetic)"; fig config.index auto
  fig config.versions "$V1 -> $NEW_VERSION"; fig config.gate "$DECISION"; }
mkdir -p "$(dirname "$RECORD")"
"$PY" "$ROOT/scripts/smoke_record.py" --load "$TMP/load.json" --timings "$FIGURES" \
    --out "$RECORD" --wall-seconds "$(since "$T_LOAD")" --load-before "$LOAD_BEFORE" 2>"$TMP/record.log" \
    || { cat "$TMP/record.log" >&2; die "could not write the record"; }
FAILED=$(json_get 'r["summary"]["failed"]' <"$TMP/load.json")
log "load: $(json_get 'r["summary"]' <"$TMP/load.json" | cut -c1-400)"
log "record: $RECORD"
done_stage record

stage down
compose down -v >"$TMP/down.log" 2>&1 || { cat "$TMP/down.log" >&2; die "compose down -v failed"; }
swept=$(sweep)
[[ -z "$swept" ]] || log "down left $(wc -w <<<"$swept") containers (scaled replicas): removed"
left=$("$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT")
[[ -z "$left" ]] || die "containers left after down: $left"
done_stage down
summary
[[ "$FAILED" == 0 ]] || die "$FAILED client requests failed (by status: see $RECORD)"
python3 -c "import sys; sys.exit(0 if $ALL - $PUBLISH <= 2 * $INTERVAL else 1)" \
    || die "a replica took over 2 reload intervals (${INTERVAL}s each) to serve the publish"
log "PASS"
