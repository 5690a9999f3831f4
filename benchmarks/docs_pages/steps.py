"""Whole training steps at large catalogues, per sampler, from `bench train-step`'s records."""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.tables import cite, load, metrics, record, table

PER_QUERY = "train_step_midx/train_step_kernels"  # uniform, midx, rff per query; 546k and 1e6
SHARED = "train_step_midx/train_step_shared"  # uniform, tapas, midx: one set a step


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}"


def _traffic(row: dict[str, Any]) -> str:
    mb = row.get("traffic_mb")
    return "-" if mb is None else f"{mb['total'] / 1000:.2f}"


def per_query_steps(page: str) -> str:
    """The uniform, midx and rff steps with per-query draws at two catalogue sizes."""
    return steps(PER_QUERY, page)


def shared_steps(page: str) -> str:
    """The uniform, tapas and midx steps with one set of draws shared by the batch."""
    return steps(SHARED, page)


def steps(run: str, page: str) -> str:
    """Each sampler's step, its phases, its modelled traffic and its ratio to uniform's step."""
    rows = metrics(run)["results"]
    uniform = {r["items"]: r["ms_per_step"] for r in rows if r["sampler"] == "uniform"}
    body = [
        [
            f"{r['items']:,}", f"`{r['sampler']}`", _seconds(r["ms_per_step"]),
            f"{r['ms_per_step'] / uniform[r['items']]:.2f}x",
            _seconds(r["phases_ms"]["draw"]), _seconds(r["phases_ms"]["sampler_update"]),
            _seconds(r["phases_ms"]["forward_and_loss"] + r["phases_ms"]["backward"]),
            _seconds(r["phases_ms"]["optimizer"]), f"{r['touched_rows']:,}", _traffic(r),
        ]
        for r in rows
    ]  # fmt: skip
    head = ["items", "sampler", "s / step", "vs uniform", "draw s", "sampler update s",
            "forward + backward s", "optimiser s", "rows touched",
            "modelled traffic GB"]  # fmt: skip
    first, facts = rows[0], record(run)
    machine, repeats = facts["machine"], facts["config"]["repeats"]
    note = (
        f"\nd = {first['dim']}, B = {first['batch']} histories of "
        f"L = {first['history']} ({first['queries']:,} queries), m = {first['num_negatives']} "
        f"{'per query' if first['per_query'] else 'shared by the batch'}, `{first['tower']}` "
        f"tower, {first['optimizer']}; s / step: the median of {repeats} timed steps after a "
        f"warm-up, each phase their mean; on "
        f"{machine['cores']} cores, {machine['torch_threads']} threads, load {load(machine)}. "
        f"Modelled traffic: the bytes the sampler's draw and update, the negatives' rows (and "
        f"their gradients) and the optimiser's update of the touched rows stream, by the code's "
        f"arithmetic (`benchmarks/speed/step_traffic.py`; the query tower's own traffic is not "
        f"in it); `-` where no model is written. "
        f"Record: {cite(run, page)}.\n"
    )
    return table(head, body) + note
