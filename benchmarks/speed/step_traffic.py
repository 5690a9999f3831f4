"""The memory traffic of a timed training step, modelled per phase, behind `bench train-step`.

This CPU has no hardware counters to read, so a row states the bytes its phases must move by
the arithmetic of the code that ran: each tensor a phase streams, at its size, read or written
once per pass (what a cache holds across passes is not subtracted). Its inputs are the step's
shapes (Q queries, m draws each, width d, n items), the sampler as built (K^2 cells, the
kernel tree's levels, features F and bucket size b) and one measured count, the u distinct item
rows the step touched (`PhaseClock.touched_rows`). fp32 values are 4 bytes, ids 8.

- negatives' logits: the R m drawn rows gathered (R sets of m draws: Q per query, B per
  history, 1 shared), their copy read by the logits, and the same again for their gradients
  in the backward (4 R m d floats);
- optimiser: SparseAdam over the u touched rows reads row, gradient and both moments, writes
  row and moments (7 u d floats);
- draw and sampler update: the sampler's own (`DRAWS`, `UPDATES`); samplers without a model
  here are left out of the row rather than guessed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

FLOAT, ID = 4, 8
MB = 1e6
Shapes = dict[str, Any]  # queries, num_negatives, dim, items, touched_rows


def _ids(s: Shapes) -> float:
    """Each draw's id and log q written."""
    return s["draw_sets"] * s["num_negatives"] * (ID + FLOAT)


def _midx_draw(s: Shapes, sampler: Any) -> float:
    """The cell tables' passes, the cell index rebuilt after an update, the draws.

    Per query, eight passes over the [Q, C] table: the two codebook scores summed, the occupied
    columns, the cells' sizes added, the row maximum, the shift, the exponential, the running
    sum; mixed by group (`cell_mixtures`), the [Q, K] scores and their float64 exponentials
    laid out by group, and the [S, C] masses in about five passes. Then the searchsorted reads
    (log2 C per draw); the index: each item's two codes read, its cell written, sorted (about
    four passes), its members written.
    """
    import torch

    codes = sampler.books.cell(torch.arange(1, s["items"] + 1))
    q, m, cells, sets = s["queries"], s["num_negatives"], len(torch.unique(codes)), s["draw_sets"]
    if sets == q:
        table = 8 * q * cells * FLOAT
    else:
        codewords = len(sampler.books.first) + len(sampler.books.second)
        table = q * codewords * (2 * FLOAT + 3 * 8) + 5 * sets * cells * 8
    index = 8 * s["items"] * ID
    draws = sets * m * (math.ceil(math.log2(max(cells, 2))) * FLOAT + 2 * ID + FLOAT)
    return table + index + draws


def _midx_update(s: Shapes, sampler: Any) -> float:
    """Each touched row read against both codebooks, its two codes written."""
    k = len(sampler.books.first) + len(sampler.books.second)
    return s["touched_rows"] * (s["dim"] * FLOAT + 2 * ID) + k * s["dim"] * FLOAT


def _tree_draw(s: Shapes, sampler: Any) -> float:
    """The kernel tree's batched descent and bucket picks (`kernel_tree.descent`, `buckets`).

    Whole levels: each level's [nodes, F] sums read once per block of queries and the [Q, nodes]
    float64 path probabilities written and read; deeper levels: two children of F floats
    gathered per draw; buckets (`buckets.pick_grouped`): each drawn bucket's b rows of d read
    once a step, and per distinct (bucket, query) pair its query row read and its b weights
    written (the model takes Q m pairs, their most).
    """
    from training.kernel_tree.descent import whole_levels
    from training.kernel_tree.node_sums import CHUNK

    tree, q, m = sampler.tree, s["queries"], s["num_negatives"]
    f = tree.fmap.dim
    levels = whole_levels(tree, q, m + 1)
    width = tree.z[levels].shape[0]
    blocks = math.ceil(q / max(1, CHUNK // (8 * width + f)))
    nodes = sum(level.shape[0] for level in tree.z[1 : levels + 1])
    whole = blocks * nodes * f * FLOAT + 2 * q * nodes * 8
    gathered = (tree.depth - levels) * q * (m + 1) * 2 * f * FLOAT
    pairs = q * (m + 1)  # the positive's bucket rides along as one more column
    buckets = min(pairs, tree.z[-1].shape[0]) * tree.b * s["dim"] * FLOAT
    buckets += pairs * (s["dim"] + tree.b) * FLOAT
    return whole + gathered + buckets + _ids(s)


def _tree_update(s: Shapes, sampler: Any) -> float:
    """Each touched row's old and new features added to its bucket, the ancestors re-summed.

    Per touched row: two feature rows of F and the row itself; per level above the buckets,
    each touched node's two children read and its sum written (3 F floats), at most as many
    nodes as the touched buckets and as the level holds.
    """
    tree = sampler.tree
    f = tree.fmap.dim
    rows = s["touched_rows"] * (2 * f + s["dim"]) * FLOAT
    buckets = min(s["touched_rows"], tree.z[-1].shape[0])
    nodes = sum(min(buckets, level.shape[0]) for level in tree.z[:-1])
    return rows + nodes * 3 * f * FLOAT


Model = Callable[[Shapes, Any], float]
DRAWS: dict[str, Model] = {
    "uniform": lambda s, _: _ids(s),
    "midx": _midx_draw,
    "rff": _tree_draw,
    "quadratic": _tree_draw,
}
UPDATES: dict[str, Model] = {
    "uniform": lambda *_: 0.0,
    "midx": _midx_update,
    "rff": _tree_update,
    "quadratic": _tree_update,
}


def draw_sets(row: dict[str, Any], sampler: Any) -> int:
    """How many sets of m draws a step makes: one per query, per history, or one shared."""
    if not row.get("per_query"):
        return 1
    per_sequence = getattr(getattr(sampler, "cfg", None), "per_sequence", False)
    return row["batch"] if per_sequence else row["queries"]


def traffic_mb(row: dict[str, Any], sampler: Any, touched_rows: float) -> dict[str, float] | None:
    """The row's modelled megabytes per step by phase and in all; None where not modelled.

    Modelled: the samplers in `DRAWS`, the kernel trees per query only (their shared draws
    score each drawn bucket against every query); not the full softmax.
    """
    name = row["sampler"]
    if name not in DRAWS:
        return None
    s = {**row, "touched_rows": touched_rows, "draw_sets": draw_sets(row, sampler)}
    if name in ("rff", "quadratic") and s["draw_sets"] != s["queries"]:
        return None
    m, d = s["num_negatives"], s["dim"]
    phases = {
        "draw": DRAWS[name](s, sampler),
        "sampler_update": UPDATES[name](s, sampler),
        "negatives_logits": 4 * s["draw_sets"] * m * d * FLOAT,
        "optimizer": 7 * touched_rows * d * FLOAT,
    }
    phases["total"] = sum(phases.values())
    return {phase: round(value / MB, 1) for phase, value in phases.items()}
