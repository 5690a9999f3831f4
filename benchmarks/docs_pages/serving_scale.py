"""The serving page's default-width run: a million items at d = 256, recall and where time goes.

From one `recsys bench serving --dim 256 --like ... --profile` record: the load phases, the
index's recall@10 against exact search at each HNSW efSearch, and the profiled closed loop
(CPU per request on each side, the server's busy time by stage).
"""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.operations import load_phases
from benchmarks.docs_pages.tables import cite, metrics, num, record, table

DEFAULT_WIDTH = "serving/serving_d256_hnsw_1m_beauty_like"
# each run's table, shaped like a trained one: (record, the trained table it was drawn like)
TABLES = (
    (DEFAULT_WIDTH, "amazon-beauty's"),
    ("serving/serving_d256_hnsw_1m_synthetic_like", "the synthetic catalogue's"),
)


def _run(run: str = DEFAULT_WIDTH) -> dict[str, Any]:
    (size,) = metrics(run)["runs"]
    return dict(size)


def default_width(page: str) -> str:
    """The load phases at d = 256."""
    return load_phases(DEFAULT_WIDTH, page)


def recall(page: str) -> str:
    """Recall@10 against exact search per efSearch, on each table, and the raw search's latency."""
    rows = []
    for run, trained in TABLES:
        raw, like = _run(run)["raw"], record(run)["config"]["like_table"]
        recalls = [num(value, 3) for value in raw["recall_at_10_vs_exact"].values()]
        rows.append([f"like {trained}", str(like["rank_90"]), *recalls, cite(run, page)])
    widths = list(_run()["raw"]["recall_at_10_vs_exact"])
    raw = _run()["raw"]
    note = (
        f"\n{_run()['items']:,} rows of d = {_run()['dim']}, each table drawn from the Gaussian "
        f"of a trained table's rows (their mean and covariance: amazon-beauty's from the `midx` "
        f"m = 64 run of the sampler comparison, the synthetic catalogue's from its `midx` run); "
        f"recall queries are draws of the same law. The served "
        f"efSearch is {raw['index']['efSearch']}; there the raw search, one query at a time, "
        f"took p50 {num(raw['search_p50_us'], 0)} µs and p99 {num(raw['search_p99_us'], 0)} µs "
        f"(first table); the query tower took {num(raw['query_tower_encode_ms'], 2)} ms for "
        f"one request's history.\n"
    )
    head = ["item table", "directions holding 90% of its variance",
            *(f"recall@10, efSearch {ef}" for ef in widths), "record"]  # fmt: skip
    return table(head, rows) + note


def profile(page: str) -> str:
    """The profiled closed loop: CPU per request and the server's busy time by stage."""
    phase = next(p for p in _run()["loads"] if "server_stage_shares" in p)
    server, client = phase["server_cpu_ms_per_request"], phase["client_cpu_ms_per_request"]
    cores = record(DEFAULT_WIDTH)["machine"]["cores"]
    rows = [[stage, f"{100 * share:.1f}%"] for stage, share in phase["server_stage_shares"].items()]
    note = (
        f"\nThe profiled closed loop made {num(phase['requests_per_s'], 1)} req/s (p99 "
        f"{num(phase['p99_ms'], 1)} ms, py-spy sampling beside it). The server spent "
        f"{num(server, 2)} ms of CPU a request and kept {num(phase['server_cores_busy'], 2)} of "
        f"the {cores} cores busy; the load client {num(client, 2)} ms a request, "
        f"{num(phase['client_cores_busy'], 2)} cores. Record: {cite(DEFAULT_WIDTH, page)}.\n"
    )
    return table(["server stage", "share of its sampled busy time"], rows) + note
