"""The serving guide's measured figures: index memory, the compose smoke's stages, the replicas run.

Each block comes from the records its script writes: `python -m scripts.index_memory`
(`index_memory/<kind>.json`), `scripts/compose-smoke.sh` (`compose_smoke/smoke.json`) and
`scripts/replicas-smoke.sh` (`replicas/replicas.json`).
"""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.tables import cite, load, metrics, record, table

KINDS = ("flat", "hnsw", "ivf", "ivfpq")
SMOKE = "compose_smoke/smoke"
REPLICAS = "replicas/replicas"


def _parameters(kind: str, index: dict[str, Any]) -> str:
    """The server's default parameters of `kind` that shape its memory."""
    return {
        "flat": "exact",
        "hnsw": f"M {index['hnsw_m']}",
        "ivf": "nlist about 4 sqrt(n)" if not index["ivf_nlist"] else f"nlist {index['ivf_nlist']}",
        "ivfpq": f"{'d / 4' if not index['pq_m'] else index['pq_m']} sub-quantizers of "
        f"{index['pq_bits']} bits",
    }[kind]


def _duration(seconds: float) -> str:
    """Seconds under a minute and a half, minutes above."""
    return f"{seconds:.1f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _memory_row(kind: str, page: str) -> list[str]:
    run = f"index_memory/{kind}"
    facts, config = metrics(run), record(run)["config"]
    index_mb, table_mb = facts["index_rss_mb_per_1e6"], facts["table_mb_per_1e6"]
    return [
        f"`{kind}` ({_parameters(kind, config['index'])})",
        f"{facts['index_serialised_mb_per_1e6']:,.0f} MB", f"{index_mb:,.0f} MB",
        f"{(index_mb + table_mb) / 1000:.2f} GB",
        f"{_duration(facts['build_seconds'])} for {config['items']:,} items",
        cite(run, page),
    ]  # fmt: skip


def index_memory(page: str) -> str:
    """Per index kind, per million items: its file, its resident growth, the model, the build."""
    rows = [_memory_row(kind, page) for kind in KINDS]
    head = ["`RECSYS_INDEX`", "index file", "index in memory", "replica's model in memory",
            "build", "record"]  # fmt: skip
    first = record(f"index_memory/{KINDS[0]}")
    dim, threads = first["config"]["dim"], first["config"]["threads"]
    note = (
        f"\nPer million items at d = {dim}, random unit vectors, the build on {threads} "
        f"thread{'s' * (threads > 1)} (load {load(first['machine'])} for the first kind; each "
        "record has its own).\n"
    )
    return table(head, rows) + note


def smoke_stages(page: str) -> str:
    """One paragraph: how long each stage of the compose smoke took, and on what."""
    facts, run = metrics(SMOKE), record(SMOKE)
    stages = {k.removeprefix("stage."): v for k, v in facts.items() if k.startswith("stage.")}
    parts = ", ".join(f"{name} {secs:.{int(secs < 10)}f} s" for name, secs in stages.items())
    machine = run["machine"]
    return (
        f"Its stage times on a {machine['cores']}-core machine with {run['config']['engine']} "
        f"(load {load(machine)}): {parts}; {run['wall_seconds'] / 60:.1f} minutes in all. The "
        f"image is {facts['image_mb']:,} MB; the api switched {facts['switch_after_retrain_s']} s "
        f"after the retrain published. Dataset: {run['config']['dataset']}. The build reuses "
        "the engine's cached layers of an earlier build; a first run on a fresh machine adds "
        "the prepare and build stages' downloads. "
        f"Record: {cite(SMOKE, page)}.\n"
    )


def replicas(page: str) -> str:
    """The replicas run's setup and its figures, as a table."""
    facts, run = metrics(REPLICAS), record(REPLICAS)
    traffic, config = facts["load"], run["config"]
    statuses = ", ".join(f"{n} answered {code}" for code, n in traffic["by_status"].items())
    rows = [
        ["requests through the balancer",
         f"{traffic['requests']:,} in {traffic['seconds']:.0f} s at {traffic['rate']:.0f} a "
         f"second: {traffic['by_method']['GET']} GET, {traffic['by_method']['POST']} POST "
         "`/recommend`"],
        ["failed client requests", f"{traffic['failed']} ({statuses})"],
        ["latency p50 / p99 / max",
         f"{traffic['p50_ms']:.1f} / {traffic['p99_ms']:.1f} / {traffic['max_ms']:.1f} ms"],
        ["SIGKILL to the killed replica answering `/ready` again",
         f"{facts['killed_replica_ready_s']} s (restarted {facts['killed_replica_restarts']}"
         f" time{'s' * (facts['killed_replica_restarts'] != 1)})"],
        ["events posted to one replica, shown by another",
         f"{facts['events_other_replica_s']} s "
         f"(through the balancer {facts['events_balancer_s']} s)"],
        [f"publish to every replica serving it (reload interval {config['reload_interval_s']} s)",
         f"{facts['publish_to_every_replica_s']:.1f} s (the first "
         f"{facts['publish_to_first_replica_s']:.1f} s)"],
        [f"the retrain (gate: {config['gate']})", f"{facts['retrain_s']} s"],
    ]  # fmt: skip
    intro = (
        f"Its figures, on a {run['machine']['cores']}-core machine with {config['engine']} "
        f"(load {load(run['machine'])}), {config['replicas']} replicas, {config['dataset']}, "
        f"index `{config['index']}` (record {cite(REPLICAS, page)}):\n\n"
    )
    return intro + table(["What", "Measured"], rows)
