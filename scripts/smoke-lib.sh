#!/usr/bin/env bash
# What the smoke scripts share (compose-smoke.sh, replicas-smoke.sh), sourced by them: the
# prepare, build and data stages, run as it is sourced (the engine and compose ready, the image
# built, a synthetic log split into the dataset and new logs in $TMP, a free host port), and
# the helpers: log/die/stage timing, `compose` (the project's files: COMPOSE_FILES,
# repo-relative, default docker-compose.yml), `containers SERVICE`, and those of
# scripts/smoke-helpers.sh (`check`, `read_decision`, `wait_trainer`, `wait_healthy`).
# SMOKE_NAME names the log prefix and the compose project.
#
# Engine: `docker compose` when a Docker daemon answers, else podman + podman-compose (the
# prepare stage installs what is missing, idempotently: podman, runc, mmdebstrap with apt-get;
# podman-compose into a venv of its own; a local stand-in for python:3.11-slim when no registry
# answers). docs/guides/serving.md ("The smoke test") describes each step.
#
# Environment (all optional):
#   RECSYS_SMOKE_ENGINE      docker | podman (default: docker if its daemon answers, else podman)
#   RECSYS_SMOKE_STATE       prepared files (containers.conf, podman-compose venv, base rootfs);
#                            default ${XDG_CACHE_HOME:-~/.cache}/recsys-compose-smoke
#   RECSYS_SMOKE_PIP_INDEX   package index for the build (default https://pypi.org/simple)
#   RECSYS_SMOKE_TORCH_INDEX torch's index (default the PyTorch CPU index when it answers, else
#                            RECSYS_SMOKE_PIP_INDEX together with the find-links folder)
#   RECSYS_SMOKE_FIND_LINKS  a wheel folder mounted into the build (podman) or a URL (default:
#                            the host pip's find-links, PIP_FIND_LINKS or `pip config`)
#   RECSYS_SMOKE_USERS / _ITEMS / _EVENTS  size of the generated log (default 300 / 200 / 4000)
#   RECSYS_SMOKE_TIMEOUT     seconds to wait for the trainer + healthy api (default 1800)
#   RECSYS_SMOKE_SWITCH_WAIT seconds from a publish until the api must serve it, and for which a
#                            kept-out candidate's old version must stay served (default 60)
#   RECSYS_SMOKE_KEEP=1      leave the project up and the temp folder in place (debugging)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

IMAGE=recsys:latest
BASE_IMAGE=python:3.11-slim
STATE="${RECSYS_SMOKE_STATE:-${XDG_CACHE_HOME:-$HOME/.cache}/recsys-compose-smoke}"
PIP_INDEX="${RECSYS_SMOKE_PIP_INDEX:-https://pypi.org/simple}"
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
USERS="${RECSYS_SMOKE_USERS:-300}"
ITEMS="${RECSYS_SMOKE_ITEMS:-200}"
EVENTS="${RECSYS_SMOKE_EVENTS:-4000}"
TIMEOUT="${RECSYS_SMOKE_TIMEOUT:-1800}"
SWITCH_WAIT="${RECSYS_SMOKE_SWITCH_WAIT:-60}"
PROJECT="recsys-${SMOKE_NAME:-smoke}-$$"
COMPOSE_FILE_ARGS=()
for f in "${COMPOSE_FILES[@]:-docker-compose.yml}"; do COMPOSE_FILE_ARGS+=(-f "$ROOT/$f"); done

declare -a STAGES=() STAGE_SECONDS=()  # printed lines; stage.NAME=SECONDS for a record
T_STAGE=0
T_ALL=$(date +%s.%N)
SMOKE_LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)  # the machine's 1-minute load as the run began
log() { printf '[%s %s] %s\n' "${SMOKE_NAME:-smoke}" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }
stage() { T_STAGE=$(date +%s.%N); log "== $1"; }
done_stage() {
    local took; took=$(since "$T_STAGE")
    STAGES+=("$(printf '%-10s %7ss' "$1" "$took")")
    STAGE_SECONDS+=("stage.$1=$took")
    log "== $1 done in ${took}s"
}
summary() {
    log "stage times:"
    local line; for line in "${STAGES[@]}"; do log "  $line"; done
    log "  total      $(since "$T_ALL")s"
}

# ---------------------------------------------------------------------------------- prepare
stage prepare
ENGINE="${RECSYS_SMOKE_ENGINE:-}"
if [[ -z "$ENGINE" ]]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1 \
        && docker compose version >/dev/null 2>&1; then
        ENGINE=docker
    else
        ENGINE=podman
    fi
fi
mkdir -p "$STATE"

apt_install() {  # apt_install PKG... : only what is missing, only as root with apt-get
    local missing=() p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null \
        || die "install ${missing[*]} (needs root and apt-get here)"
    log "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -q "${missing[@]}" >/dev/null; } \
        || die "apt-get install ${missing[*]} failed"
}

if [[ "$ENGINE" == docker ]]; then
    COMPOSE=(docker compose)
    BUILD_FLAGS=()
else
    command -v podman >/dev/null && command -v runc >/dev/null || apt_install podman runc
    # runc (crun refuses some cgroup layouts), cgroupfs (no systemd needed), and no default
    # ulimits (a container may not be allowed to raise them); a user's own CONTAINERS_CONF wins.
    if [[ -z "${CONTAINERS_CONF:-}" ]]; then
        conf="$STATE/containers.conf"
        want=$'[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"'
        [[ -f "$conf" && "$(cat "$conf")" == "$want" ]] || printf '%s\n' "$want" > "$conf"
        export CONTAINERS_CONF="$conf"
    fi
    if command -v podman-compose >/dev/null; then
        COMPOSE=(podman-compose)
    else
        if [[ ! -x "$STATE/venv/bin/podman-compose" ]]; then
            log "podman-compose into $STATE/venv"
            python3 -m venv "$STATE/venv" && "$STATE/venv/bin/pip" install -q podman-compose \
                || die "could not install podman-compose"
        fi
        COMPOSE=("$STATE/venv/bin/podman-compose")
    fi
    # The image format `docker` keeps the Dockerfile's HEALTHCHECK (OCI drops it).
    BUILD_FLAGS=(--format docker)
    if ! podman image exists "$BASE_IMAGE"; then
        if timeout 60 podman pull -q "docker.io/library/$BASE_IMAGE" >/dev/null 2>&1; then
            log "pulled $BASE_IMAGE"
        else
            # No registry: a Debian bookworm root filesystem with Python 3.11 stands in.
            log "no registry answers: building a local stand-in for $BASE_IMAGE"
            if [[ ! -f "$STATE/base.tar" ]]; then
                rm -rf "$STATE/base.tar" "$STATE/base.tar.part"  # not a tarball: made again
                command -v mmdebstrap >/dev/null || apt_install mmdebstrap
                mmdebstrap --variant=minbase --format=tar \
                    --include=python3,python3-pip,python3-venv,ca-certificates \
                    bookworm "$STATE/base.tar.part" >/dev/null 2>&1 || die "mmdebstrap failed"
                mv "$STATE/base.tar.part" "$STATE/base.tar"
            fi
            podman import -q "$STATE/base.tar" localhost/recsys-smoke-base-raw:latest >/dev/null
            mkdir -p "$STATE/base-context"
            cat > "$STATE/base-context/Containerfile" <<'EOF'
FROM localhost/recsys-smoke-base-raw:latest
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
# What python:3.11-slim has: `python`, and pip that may install system-wide.
RUN ln -sf python3 /usr/bin/python && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
LABEL org.opencontainers.image.description="recsys compose smoke: local stand-in for python:3.11-slim"
CMD ["python3"]
EOF
            podman build -q -t "docker.io/library/$BASE_IMAGE" "$STATE/base-context" >/dev/null \
                || die "could not build the stand-in base image"
            podman rmi localhost/recsys-smoke-base-raw:latest >/dev/null 2>&1 || true
        fi
    fi
fi
log "engine: $ENGINE; compose: ${COMPOSE[*]} ($("${COMPOSE[@]}" version 2>/dev/null | head -1))"
done_stage prepare

# ------------------------------------------------------------------------------------ build
stage build
FIND_LINKS="${RECSYS_SMOKE_FIND_LINKS:-${PIP_FIND_LINKS:-$(python3 -m pip config get global.find-links 2>/dev/null || true)}}"
FIND_LINKS="${FIND_LINKS%% *}"  # the first one
BUILD_ARGS=(--build-arg "PIP_INDEX=$PIP_INDEX")
if [[ -n "$FIND_LINKS" && -d "$FIND_LINKS" ]]; then
    if [[ "$ENGINE" == podman ]]; then
        BUILD_FLAGS+=(-v "$FIND_LINKS:/wheels:ro")
        BUILD_ARGS+=(--build-arg FIND_LINKS=/wheels)
    else
        log "find-links folder $FIND_LINKS ignored: docker build cannot mount it"
        FIND_LINKS=""
    fi
elif [[ -n "$FIND_LINKS" ]]; then
    BUILD_ARGS+=(--build-arg "FIND_LINKS=$FIND_LINKS")
fi
TORCH_INDEX="${RECSYS_SMOKE_TORCH_INDEX:-}"
if [[ -z "$TORCH_INDEX" ]]; then
    if curl -sf -o /dev/null --max-time 15 "$TORCH_CPU_INDEX/torch/"; then
        TORCH_INDEX="$TORCH_CPU_INDEX"
    elif [[ -n "$FIND_LINKS" ]]; then
        TORCH_INDEX="$PIP_INDEX"  # the CPU wheel from the find-links folder
        log "$TORCH_CPU_INDEX does not answer: torch from $FIND_LINKS"
    else
        die "$TORCH_CPU_INDEX does not answer and no find-links folder holds torch"
    fi
fi
BUILD_ARGS+=(--build-arg "TORCH_INDEX_URL=$TORCH_INDEX")
# The host's network and CA bundle (a proxy's own CA reaches pip that way).
BUILD_FLAGS+=(--network host)
if [[ "$ENGINE" == podman && -f /etc/ssl/certs/ca-certificates.crt ]]; then
    BUILD_FLAGS+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
fi
log "$ENGINE build ${BUILD_FLAGS[*]} ${BUILD_ARGS[*]} -t $IMAGE ."
"$ENGINE" build "${BUILD_FLAGS[@]}" "${BUILD_ARGS[@]}" -t "$IMAGE" . >"$STATE/build.log" 2>&1 \
    || { tail -30 "$STATE/build.log" >&2; die "build failed (log: $STATE/build.log)"; }
SIZE=$("$ENGINE" image inspect "$IMAGE" --format '{{.Size}}')
BASE_SIZE=$("$ENGINE" image inspect "$BASE_IMAGE" --format '{{.Size}}' 2>/dev/null || echo 0)
log "image $IMAGE: $((SIZE / 1000000)) MB (base $BASE_IMAGE: $((BASE_SIZE / 1000000)) MB)"
done_stage build

# ------------------------------------------------------------------------------------- data
stage data
TMP="$(mktemp -d "${TMPDIR:-/tmp}/recsys-smoke.XXXXXX")"
chmod 755 "$TMP"  # the image's user (uid 10001) reads the mounted folders
mkdir -p "$TMP/datasets" "$TMP/logs"
cleanup() {
    local rc=$?
    if [[ "${RECSYS_SMOKE_KEEP:-0}" == 1 ]]; then
        log "kept: project $PROJECT (${COMPOSE[*]} -p $PROJECT down -v), $TMP"
    else
        (cd "$TMP" 2>/dev/null && env "${COMPOSE_ENV[@]}" "${COMPOSE[@]}" -p "$PROJECT" \
            "${COMPOSE_FILE_ARGS[@]}" down -v >/dev/null 2>&1) || true
        sweep >/dev/null 2>&1 || true
        rm -rf "$TMP"
    fi
    exit "$rc"
}
sweep() {  # the project's containers `down` left (podman-compose's down misses --scale's extra
    # replicas), removed, then `down -v` once more for its network and volume; prints their ids
    local left
    left=$("$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT")
    [[ -n "$left" ]] || return 0
    echo $left
    # shellcheck disable=SC2086
    "$ENGINE" rm -f $left >/dev/null 2>&1 || true
    env "${COMPOSE_ENV[@]}" "${COMPOSE[@]}" -p "$PROJECT" "${COMPOSE_FILE_ARGS[@]}" down -v >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A synthetic log as if it were the user's own (the demo home of `--dataset synthetic` refuses
# new logs by design): its first 80% is the dataset `up` trains on, the rest the new logs of the
# retrain, each of their users' last two events on three new items (see the header: a certain
# gate decision).
"$ENGINE" run --rm --no-healthcheck --network none --user 0 -v "$TMP:/out" "$IMAGE" recsys synth \
    --users "$USERS" --items "$ITEMS" --events "$EVENTS" --seed 7 --out /out/all.csv >/dev/null
rows=$(($(wc -l < "$TMP/all.csv") - 1))
cut=$((rows * 8 / 10))
head -n $((cut + 1)) "$TMP/all.csv" > "$TMP/datasets/events.csv"
{ head -n 1 "$TMP/all.csv"; tail -n +$((cut + 2)) "$TMP/all.csv"; } > "$TMP/logs/new.csv"
python3 - "$TMP/logs/new.csv" <<'EOF'
import csv, sys
path = sys.argv[1]
with open(path, newline="") as f:
    rows = list(csv.DictReader(f))
last = max(int(r["timestamp"]) for r in rows)
users = sorted({r["user_id"] for r in rows})
with open(path, "a", newline="") as f:
    w = csv.writer(f)
    for n, user in enumerate(users):  # after every other event: each user's val and test rows
        for step in (0, 1):
            w.writerow([user, f"i-new-{(n + step) % 3}", last + 60 * (2 * n + step + 1)])
EOF
# A user and items the first model knows: the heaviest user of the dataset and its first items.
read -r USER_ID ITEM_A ITEM_B < <(python3 - "$TMP/datasets/events.csv" <<'EOF'
import collections, csv, sys
with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f))
user = collections.Counter(r["user_id"] for r in rows).most_common(1)[0][0]
items = list(dict.fromkeys(r["item_id"] for r in rows if r["user_id"] == user))
print(user, items[0], items[1] if len(items) > 1 else items[0])
EOF
)
chmod -R a+rX "$TMP"
NEW_EVENTS=$(($(wc -l < "$TMP/logs/new.csv") - 1))
log "dataset: $cut events (user $USER_ID, items $ITEM_A $ITEM_B), new logs: $NEW_EVENTS events (3 new items, each user's last two)"
rm -f "$TMP/all.csv"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
COMPOSE_ENV=(RECSYS_PORT="$PORT" RECSYS_DATA_DIR="$TMP/datasets" RECSYS_LOGS_DIR="$TMP/logs"
             RECSYS_DATASET=/data/in/events.csv)
compose() { env "${COMPOSE_ENV[@]}" "${COMPOSE[@]}" -p "$PROJECT" "${COMPOSE_FILE_ARGS[@]}" "$@"; }
containers() {  # containers SERVICE -> ids of the project's containers for it, by name
    "$ENGINE" ps -a --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=$1" --format '{{.Names}} {{.ID}}' \
        | sort | cut -d' ' -f2
}
container() { containers "$1" | head -1; }  # container SERVICE -> the first one's id
done_stage data

# The helpers the scripts use after the stages: check, read_decision, wait_trainer, wait_healthy.
# shellcheck source=scripts/smoke-helpers.sh
source "$ROOT/scripts/smoke-helpers.sh"
