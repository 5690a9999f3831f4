"""The serving page's default-width runs: a million items at d = 256, one process and replicas.

From `recsys bench serving --dim 256 --like ... --profile` records: the load phases of one
server process and of two replicas behind the balancer, the index's recall@10 against exact
search at each HNSW efSearch (on two synthetic tables and on a trained one, with the model's
own users as queries), and the profiled closed loops (CPU per request on each side, the
server's busy time by stage).
"""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.operations import load_phases
from benchmarks.docs_pages.tables import cite, metrics, num, record, table

DEFAULT_WIDTH = "serving/serving_d256_hnsw_1m_beauty_like"
REPLICAS = "serving/serving_d256_hnsw_1m_beauty_like_2replicas"
# `benchmarks.studies.trained_table_recall`: trained tables queried by their own users
TRAINED = ("serving/trained_table_recall_546k", "serving/trained_table_recall_1m")
SERVED_TRAINED = "serving/serving_d256_hnsw_trained_1m_2replicas"  # `bench serving --bundle`
# each run's table, shaped like a trained one: (record, the trained table it was drawn like)
TABLES = (
    (DEFAULT_WIDTH, "amazon-beauty's"),
    ("serving/serving_d256_hnsw_1m_synthetic_like", "the synthetic catalogue's"),
)


def _run(run: str = DEFAULT_WIDTH) -> dict[str, Any]:
    (size,) = metrics(run)["runs"]
    return dict(size)


def default_width(page: str) -> str:
    """The load phases at d = 256: one process, two replicas, two replicas of a trained model."""
    trained = _run(SERVED_TRAINED)
    return (
        "One server process:\n\n" + load_phases(DEFAULT_WIDTH, page)
        + "\nTwo replicas behind the balancer (`--replicas 2`):\n\n" + load_phases(REPLICAS, page)
        + f"\nA trained model of {trained['items']:,} items served as it is (`--bundle`), two "
        f"replicas behind the balancer at efSearch {trained['raw']['index']['efSearch']}:\n\n"
        + load_phases(SERVED_TRAINED, page)
    )  # fmt: skip


def recall(page: str) -> str:
    """Recall@10 against exact search per efSearch: the synthetic tables, then a trained one."""
    widths = list(_run()["raw"]["recall_at_10_vs_exact"])
    rows = []
    for run, trained in TABLES:
        found, like = _run(run)["raw"]["recall_at_10_vs_exact"], record(run)["config"]["like_table"]
        recalls = [num(found[ef], 3) if ef in found else "-" for ef in widths]
        rows.append([f"{_run(run)['items']:,} rows like {trained}", str(like["rank_90"]),
                     *recalls, cite(run, page)])  # fmt: skip
    for study in TRAINED:
        by_ef = _by_ef(study)
        rows.append([f"a trained table itself ({record(study)['config']['items']:,} rows)", "-",
                     *(num(by_ef[ef]["recall_at_10"], 3) if ef in by_ef else "-" for ef in widths),
                     cite(study, page)])  # fmt: skip
    head = ["item table", "directions holding 90% of its variance",
            *(f"recall@10, efSearch {ef}" for ef in widths), "record"]  # fmt: skip
    return table(head, rows) + _recall_note()


def _by_ef(study: str) -> dict[str, dict[str, Any]]:
    """A trained-table study's rows by efSearch."""
    return {str(row["ef_search"]): row for row in metrics(study)["by_ef_search"]}


def _recall_note() -> str:
    raw = _run()["raw"]
    small, large = (record(study)["config"] for study in TRAINED)
    search = ", ".join(
        f"{num(row['search_p50_us'], 0)} µs at {ef}" for ef, row in _by_ef(TRAINED[1]).items()
    )
    return (
        f"\nThe synthetic tables hold {_run()['items']:,} rows of d = {_run()['dim']}, drawn "
        f"from the Gaussian of a trained table's rows (their mean and covariance, put on the "
        f"unit sphere as the trained rows are: amazon-beauty's from the `midx` m = 64 run of "
        f"the sampler comparison, the synthetic catalogue's from its `midx` run); their recall "
        f"queries are draws of the same law. The trained tables are the models of two "
        f"synthetic logs, each queried with its trained query tower's vectors for "
        f"{small['queries']:,} of its validation users: the half-million-item catalogue's "
        f"(its `midx` run with popularity_alpha 0.75) and a log of {large['items']:,} items "
        f"({_trained_with(large['run_config'])}). The served efSearch is "
        f"{raw['index']['efSearch']}; there the raw search of the first table, one query at a "
        f"time, took p50 {num(raw['search_p50_us'], 0)} µs and p99 "
        f"{num(raw['search_p99_us'], 0)} µs, and the query tower "
        f"{num(raw['query_tower_encode_ms'], 2)} ms for one request's history. Search p50 on "
        f"the {large['items']:,}-item trained table: {search}.\n"
    )


def _trained_with(cfg: dict[str, Any]) -> str:
    """How the run behind a trained table was trained, from its resolved config."""
    sampler, train = cfg["sampler"], cfg["train"]
    draws = "per query" if sampler.get("per_query") else "shared by the batch"
    sparse = ", sparse embeddings" if train["sparse_embeddings"] else ""
    minutes = f"at most {train['max_minutes']:g} minutes" if train["max_minutes"] else "no cap"
    threads = train["threads"] or "every"
    return (
        f"`{sampler['name']}` at m = {sampler['num_negatives']}, draws {draws}{sparse}, "
        f"d = {cfg['model']['dim']}, {minutes} on {threads} thread{'' if threads == 1 else 's'}"
    )


def profile(page: str) -> str:
    """The profiled closed loops: CPU per request on each side, the server's busy time by stage."""
    one, two, trained = (next(p for p in _run(r)["loads"] if "server_stage_shares" in p)
                         for r in (DEFAULT_WIDTH, REPLICAS, SERVED_TRAINED))  # fmt: skip
    shares = [phase["server_stage_shares"] for phase in (one, two, trained)]
    rows = [[stage, *(f"{100 * share.get(stage, 0.0):.1f}%" for share in shares)]
            for stage in shares[0]]  # fmt: skip
    head = ["server stage", "share of its sampled busy time: one process", "a replica of two",
            "a replica of two, trained model"]  # fmt: skip
    return table(head, rows) + (
        _cpu_note(one, "one server process", DEFAULT_WIDTH, page)
        + _cpu_note(two, "two replicas behind the balancer", REPLICAS, page)
        + _cpu_note(trained, "two replicas of the trained model", SERVED_TRAINED, page)
    )


def _cpu_note(phase: dict[str, Any], what: str, run: str, page: str) -> str:
    cores = record(run)["machine"]["cores"]
    balancer = (
        f"; the balancer {num(phase['balancer_cpu_ms_per_request'], 2)} ms a request, "
        f"{num(phase['balancer_cores_busy'], 2)} cores"
        if "balancer_cpu_ms_per_request" in phase
        else ""
    )
    each = phase.get("each_server_cores_busy")
    split = f" ({' + '.join(num(c, 2) for c in each)})" if each and len(each) > 1 else ""
    return (
        f"\nWith {what}, the profiled closed loop made {num(phase['requests_per_s'], 1)} req/s "
        f"(p99 {num(phase['p99_ms'], 1)} ms, py-spy sampling beside it). The server side spent "
        f"{num(phase['server_cpu_ms_per_request'], 2)} ms of CPU a request and kept "
        f"{num(phase['server_cores_busy'], 2)}{split} of the {cores} cores busy; the load "
        f"client {num(phase['client_cpu_ms_per_request'], 2)} ms a request, "
        f"{num(phase['client_cores_busy'], 2)} cores{balancer}. Record: {cite(run, page)}.\n"
    )
