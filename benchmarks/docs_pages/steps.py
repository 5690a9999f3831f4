"""Whole training steps at large catalogues, per sampler, from `bench train-step`'s records."""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, load, metrics, record, table

RUN = "train_step_midx/train_step_1m"  # uniform and midx at 1e6 items, 3 timed steps each
KERNELS = "train_step_midx/train_step_kernels"  # with rff, at 546,526 and 1e6 items, 1 step each


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}"


def step_at_a_million(page: str) -> str:
    """The uniform and midx steps at a million items."""
    return steps(RUN, page)


def kernel_steps(page: str) -> str:
    """The uniform, midx and rff steps at two catalogue sizes."""
    return steps(KERNELS, page)


def steps(run: str, page: str) -> str:
    """Each sampler's step and its phases, and its ratio to uniform's step at its size."""
    rows = metrics(run)["results"]
    uniform = {r["items"]: r["ms_per_step"] for r in rows if r["sampler"] == "uniform"}
    body = [
        [
            f"{r['items']:,}", f"`{r['sampler']}`", _seconds(r["ms_per_step"]),
            f"{r['ms_per_step'] / uniform[r['items']]:.2f}x",
            _seconds(r["phases_ms"]["draw"]), _seconds(r["phases_ms"]["sampler_update"]),
            _seconds(r["phases_ms"]["forward_and_loss"] + r["phases_ms"]["backward"]),
            _seconds(r["phases_ms"]["optimizer"]),
        ]
        for r in rows
    ]  # fmt: skip
    head = ["items", "sampler", "s / step", "vs uniform", "draw s", "sampler update s",
            "forward + backward s", "optimiser s"]  # fmt: skip
    first, facts = rows[0], record(run)
    machine = facts["machine"]
    note = (
        f"\nd = {first['dim']}, B = {first['batch']} histories of "
        f"L = {first['history']} ({first['queries']:,} queries), m = {first['num_negatives']} "
        f"per query, `{first['tower']}` tower, {first['optimizer']}; averaged over the timed "
        f"steps, on {machine['cores']} cores, {machine['torch_threads']} threads, load "
        f"{load(machine)}. Record: {cite(run, page)}.\n"
    )
    return table(head, body) + note
