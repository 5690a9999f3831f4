"""Result blocks of operating a model: retraining warm against from scratch, and serving.

Retraining: the warm retrain with the current defaults (2 fit rounds, 20 refit epochs) and the
full retrain on the same split, with the paired interval the study recorded beside them
(`benchmarks/studies/retrain_warm.py`, `paired_refit_r2_e20*.json`). Serving: the committed
`recsys bench serving` run.
"""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, interval, load, metrics, num, record, table

# (dataset, precision, seed, folder, suffix): a study folder's pair of runs with the defaults
RETRAINS = (
    ("amazon-beauty", "bf16", 42, "retrain_cap", ""),
    ("amazon-beauty", "fp32", 42, "retrain_fp32_cap", ""),
    ("amazon-beauty", "fp32", 43, "retrain_fp32_cap", "_seed43"),
    ("amazon-toys", "bf16", 42, "retrain_toys_cap", ""),
    ("amazon-toys", "fp32", 42, "retrain_toys_fp32", ""),
)
WARM = "warm_refit_p1_r2_e20"
SERVING = "serving/serving"


def _retrain_row(folder: str, suffix: str, page: str) -> list[str]:
    """Seconds of each retrain, the warm one's share, test NDCG@10 of each, the paired gap."""
    full, warm = f"{folder}/full_refit{suffix}", f"{folder}/{WARM}{suffix}"
    paired = metrics(f"{folder}/paired_refit_r2_e20{suffix}")["results"][0]
    seconds = [metrics(run)["wall_seconds"] for run in (full, warm)]
    ndcg = [metrics(run)["test"]["metrics"]["ndcg@10"] for run in (full, warm)]
    vs = (paired["vs_reference"], paired["ci95_low"], paired["ci95_high"])
    return [
        num(seconds[0], 0), num(seconds[1], 0), f"{100 * seconds[1] / seconds[0]:.1f}%",
        f"{num(ndcg[0])} / {num(ndcg[1])}", interval(vs),
        " / ".join(load(record(run)["machine"]) for run in (full, warm)),
        ", ".join(cite(run, page) for run in (full, warm)),
    ]  # fmt: skip


def retraining(page: str) -> str:
    """The warm retrain against the full one, per dataset, precision and seed."""
    rows = [
        [dataset, precision, str(seed), *_retrain_row(folder, suffix, page)]
        for dataset, precision, seed, folder, suffix in RETRAINS
    ]
    head = ["dataset", "precision", "seed", "full retrain s", "warm retrain s",
            "warm / full time", "test NDCG@10 full / warm", "warm vs full (95%)",
            "load (full / warm)", "records"]  # fmt: skip
    return table(head, rows)


def serving(page: str) -> str:
    """Latency and throughput of `POST /recommend` per catalogue size and load phase."""
    return load_phases(SERVING, page)


def load_phases(run: str, page: str) -> str:
    """A `bench serving` record's load phases: throughput and latency per size and phase."""
    rows = []
    for size in metrics(run)["runs"]:
        index = size["raw"]["index"]
        kind = f"{index['kind']} (M {index['M']}, efSearch {index['efSearch']})"
        for phase in size["loads"]:
            rows.append([
                f"{size['items']:,}", kind,
                phase["mode"], num(phase["requests_per_s"], 1), num(phase["p50_ms"], 2),
                num(phase["p95_ms"], 2), num(phase["p99_ms"], 2), num(phase["max_ms"], 1),
                str(phase["errors"]),
            ])  # fmt: skip
    head = ["items", "index", "phase", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors"]
    facts = record(run)["machine"]
    note = (
        f"\nServer and client on one machine of {facts['cores']} CPU cores; load: "
        f"{load(facts)}. Record: {cite(run, page)}.\n"
    )
    return table(head, rows) + note


def search(page: str) -> str:
    """The index search and the query tower alone, in one process, per catalogue size."""
    rows = [
        [f"{run['items']:,}", num(run["raw"]["search_p50_us"], 0),
         num(run["raw"]["search_p99_us"], 0), num(run["raw"]["query_tower_encode_ms"], 2)]
        for run in metrics(SERVING)["runs"]
    ]  # fmt: skip
    head = ["items", "search p50 µs", "search p99 µs", "query tower encode ms"]
    return table(head, rows) + f"\nRecord: {cite(SERVING, page)}.\n"
