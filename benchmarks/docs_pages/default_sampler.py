"""The default sampler's limit: a full-softmax step against a `midx` one, by catalogue size.

From the `default_sampler` study's `bench train-step` records: the default model's step (one
query a window), each sampler as the default trains it, at catalogue sizes around and above
`sampler.full_up_to`.
"""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.tables import cite, load, metrics, record, table

STUDY = "default_sampler"
RUNS = (f"{STUDY}/train_step_crossover", f"{STUDY}/train_step")  # around the limit, then wide


def step_costs(page: str) -> str:
    """Milliseconds per step of both samplers at each size, their ratio, and what `auto` picks."""
    from training.sampler_settings import AutoSampler

    auto = AutoSampler()
    rows = []
    for run in RUNS:
        for items, ms in sorted(_by_size(metrics(run)["results"]).items()):
            picked = auto.pick(items).name
            rows.append(
                [f"{items:,}", f"{ms['full']:.0f}", f"{ms['midx']:.0f}",
                 f"{ms['full'] / ms['midx']:.2f}x", f"`{picked}`", cite(run, page)]
            )  # fmt: skip
    head = ["items", "full softmax ms / step", "`midx` ms / step", "full / midx",
            "`auto` trains", "record"]  # fmt: skip
    return table(head, rows) + _setup(RUNS[0])


def _by_size(rows: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """Median ms per step by catalogue size, then sampler."""
    found: dict[int, dict[str, float]] = {}
    for row in rows:
        found.setdefault(row["items"], {})[row["sampler"]] = row["ms_per_step"]
    return found


def _setup(run: str) -> str:
    """How the steps were timed (the same in both records)."""
    facts = record(run)
    rows, machine = facts["metrics"]["results"], facts["machine"]
    first, optimisers = rows[0], " / ".join(sorted({row["optimizer"] for row in rows}))
    return (
        f"\nThe default model (`{first['tower']}`, d = {first['dim']}, L = {first['history']}), "
        f"B = {first['batch']} windows a step, one query each; `midx` at m = "
        f"{facts['config']['num_negatives']} per query; {optimisers} for both; "
        f"matmuls in {machine['precision']}. Each figure is the median of "
        f"{facts['config']['repeats']} timed steps after a warm-up, on {machine['cores']} cores "
        f"with {machine['torch_threads']} thread, alone on the machine (load {load(machine)}).\n"
    )
