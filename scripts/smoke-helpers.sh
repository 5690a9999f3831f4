#!/usr/bin/env bash
# The smoke scripts' request and wait helpers, sourced by scripts/smoke-lib.sh after its stages:
# `check` (a request and an assertion on its JSON), `read_decision` (the retrain's --json
# decision), `wait_trainer`, `health` and `wait_healthy`. They use smoke-lib.sh's `log`, `die`,
# `compose`, `container`, $ENGINE and $TMP.
check() {  # check NAME PYTHON-ASSERTION CURL-ARGS... : the JSON answer as `r`
    local name=$1 expr=$2; shift 2
    local body
    body=$(curl -sS --max-time 30 -f "$@") || die "$name: request failed"
    python3 - "$name" "$expr" "$body" <<'EOF' || die "$name: unexpected answer"
import json, sys
name, expr, body = sys.argv[1:]
r = json.loads(body)
assert eval(expr), f"{name}: {expr} does not hold for {body[:400]}"
print(f"{name}: {body[:160]}{'...' if len(body) > 160 else ''}", file=sys.stderr)
EOF
}

read_decision() {  # read_decision FILE: sets PUBLISHED NEW_VERSION OLD_VERSION DECISION REASON
    # The gate's decision, from the one JSON line `--json` prints (compose may print around it).
    read -r PUBLISHED NEW_VERSION OLD_VERSION DECISION REASON < <(python3 - "$1" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1], encoding="utf-8") if l.startswith("{")]
if not lines:
    sys.exit("no JSON object in the retrain's output")
r = json.loads(lines[-1])
gate = r.get("gate") or {}
print(str(r["published"]).lower(), r["version"], r["previous_version"],
      gate.get("decision", "none"), " ".join(r["reason"].split()))
EOF
    ) || { cat "$1" >&2; die "could not read the retrain's JSON decision"; }
    [[ -n "${NEW_VERSION:-}" ]] || { cat "$1" >&2; die "no decision in the retrain's JSON"; }
}

wait_trainer() {  # wait_trainer DEADLINE: the trainer exited 0 (its log in $TMP/trainer.log)
    local trainer="" code
    while [[ -z "$trainer" ]]; do trainer=$(container trainer); sleep 1; done
    while [[ "$("$ENGINE" inspect -f '{{.State.Status}}' "$trainer")" != exited ]]; do
        [[ $(date +%s) -lt $1 ]] || die "trainer still running after ${TIMEOUT}s"
        sleep 5
    done
    code=$("$ENGINE" inspect -f '{{.State.ExitCode}}' "$trainer")
    "$ENGINE" logs "$trainer" >"$TMP/trainer.log" 2>&1 || true
    [[ "$code" == 0 ]] || { tail -30 "$TMP/trainer.log" >&2; die "trainer exited $code"; }
    log "trainer exited 0: $(grep -m1 -i 'publish' "$TMP/trainer.log" || tail -1 "$TMP/trainer.log")"
}

health() {  # health CONTAINER -> its healthcheck status (healthy, starting, ..., none)
    if [[ "$ENGINE" == podman ]]; then
        # podman runs healthchecks from systemd timers; without systemd, run the compose
        # file's healthcheck here, which records the result as the timer would.
        podman healthcheck run "$1" >/dev/null 2>&1 || true
    fi
    "$ENGINE" inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null || echo none
}

wait_healthy() {  # wait_healthy CONTAINER DEADLINE: its healthcheck passes, or the run fails
    local state
    until [[ "$(health "$1")" == healthy ]]; do
        state=$("$ENGINE" inspect -f '{{.State.Status}}' "$1")
        if [[ "$state" == exited || $(date +%s) -ge $2 ]]; then
            "$ENGINE" logs "$1" 2>&1 | tail -30 >&2
            die "api $1 not healthy (state $state)"
        fi
        sleep 2
    done
}
