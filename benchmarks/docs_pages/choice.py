"""The sampler guide's table: each sampler's quality at 12k and at 546k items, and its speed.

One row per sampler, from the sampler comparison's m = 64 runs on amazon-beauty and the
half-million-item catalogue's m = 256 runs, best on the large catalogue first (a sampler not
run there last), so the table reads as the advice it supports.
"""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.quality import CATALOGUE, DATASETS, LARGE, SWEEP, sweep_rows
from benchmarks.docs_pages.tables import cite, interval, num, table

# the samplers compared, by the label of their sweep runs (tapas: the paper's ratio r = 8)
LABELS = ("full", "tapas-r8", "tapas-midx", "popularity", "mixed", "in-batch", "uniform", "rff",
          "midx", "midx-pop", "exact", "bernoulli", "quadratic")  # fmt: skip
# where a sampler's runs carry another label: midx and tapas over a midx first pass ran at 12k
# at the recipe study's model settings (paired with the full softmax at those settings), midx
# at 546k with shared draws
SMALL_RUNS = {"midx": "midx-tau0.1-len20", "tapas-midx": "tapas-midx-tau0.1-len20"}
LARGE_RUNS = {"midx": "midx-shared", "midx-pop": "midx-pop-shared", "tapas-midx": "tapas-midx-r8"}
NAMES = {
    "full": "full softmax", "midx-pop": "`midx`, `popularity_alpha` 0.75",
    "tapas-midx": "`tapas-r8`, `first_pass` midx",
}  # fmt: skip


def _by_label(
    study: str, dataset: str, m: int, aliases: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """A sweep's runs on `dataset` at `m` negatives (or none: full, in-batch), by label.

    `aliases`: a sampler's label in this table for the label its runs carry.
    """
    rows = sweep_rows(study)[dataset]
    plain = [r for r in rows if r["num_negatives"] in (None, m) and not r["loss_variant"]]
    by = {r["label"]: r for r in plain}
    return {**by, **{name: by[label] for name, label in aliases.items() if label in by}}


def _quality(run: dict[str, Any] | None) -> list[str]:
    if run is None:
        return ["not run", "-"]
    return [num(run["test"]["ndcg@10"]), interval(run["vs_full"])]


def _speed(run: dict[str, Any] | None) -> list[str]:
    if run is None or not run["sampling_calls"]:
        return ["-", "-"]
    return [str(run["sampling_calls"]), num(run["sampling_ms_per_step"], 1)]


def sampler_choice(page: str) -> str:
    """The table, then what its speed columns count and where its figures come from."""
    small = _by_label(SWEEP, DATASETS[0], 64, SMALL_RUNS)
    large = _by_label(CATALOGUE, LARGE, 256, LARGE_RUNS)
    order = sorted(LABELS, key=lambda s: -large[s]["test"]["ndcg@10"] if s in large else 1.0)
    rows = []
    for label in order:
        name = NAMES.get(label, f"`{label}`")
        rows.append([name, *_quality(small.get(label)), *_quality(large.get(label)),
                     *_speed(large.get(label))])  # fmt: skip
    head = ["sampler", "12k items: test NDCG@10", "vs full softmax (95%)",
            "546k items: test NDCG@10", "vs full softmax (95%)",
            "546k items: training steps in the budget", "546k items: ms per draw"]  # fmt: skip
    runs = list(large.values())
    loads = [r["machine"][k] for r in runs for k in ("load_before", "load_after")]
    note = (
        f"\n12k items: amazon-beauty, m = 64; 546k items: a synthetic log, m = 256; each run "
        f"given the same 30-minute budget (or early stopping) on "
        f"{runs[0]['machine']['cores']} CPU cores "
        f"(load {min(loads):.1f} to {max(loads):.1f} at 546k), test NDCG@10 by full ranking and "
        f"its paired gap to the full softmax under the same budget. Training steps: the steps "
        f"the run made in its budget, one draw of m negatives each; ms per draw: the mean wall "
        f"time of the sampler's draw call within those steps (the kernel tree's updates and "
        f"rebuilds after each step are not in it). `midx` and `tapas` over `midx` at 12k items: "
        f"their runs at the recipe study's model settings (sasrec, L = 20, temperature 0.1), "
        f"against the full softmax "
        f"at those settings; `midx` at 546k items with one set of draws shared by the batch "
        f"(its popularity-weighted last stage there only). "
        f"Records: {cite(f'{SWEEP}/report', page)}, "
        f"{cite(f'{CATALOGUE}/report', page)} and the runs beside them.\n"
    )
    return table(head, rows) + note
