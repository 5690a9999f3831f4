"""Whole training steps at a million items, per sampler, from `bench train-step`'s record."""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, load, metrics, record, table

RUN = "train_step_midx/train_step_1m"


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}"


def step_at_a_million(page: str) -> str:
    """Each sampler's step and its phases, and its ratio to uniform's step in the same run."""
    rows = metrics(RUN)["results"]
    uniform = next(r for r in rows if r["sampler"] == "uniform")["ms_per_step"]
    body = [
        [
            f"`{r['sampler']}`", _seconds(r["ms_per_step"]), f"{r['ms_per_step'] / uniform:.2f}x",
            _seconds(r["phases_ms"]["draw"]), _seconds(r["phases_ms"]["sampler_update"]),
            _seconds(r["phases_ms"]["forward_and_loss"] + r["phases_ms"]["backward"]),
            _seconds(r["phases_ms"]["optimizer"]),
        ]
        for r in rows
    ]  # fmt: skip
    head = ["sampler", "s / step", "vs uniform", "draw s", "sampler update s",
            "forward + backward s", "optimiser s"]  # fmt: skip
    first, facts = rows[0], record(RUN)
    machine = facts["machine"]
    note = (
        f"\n{first['items']:,} items, d = {first['dim']}, B = {first['batch']} histories of "
        f"L = {first['history']} ({first['queries']:,} queries), m = {first['num_negatives']} "
        f"per query, `{first['tower']}` tower, {first['optimizer']}; averaged over the timed "
        f"steps, on {machine['cores']} cores, {machine['torch_threads']} threads, load "
        f"{load(machine)}. Record: {cite(RUN, page)}.\n"
    )
    return table(head, body) + note
