"""Logit corrections: small named steps applied once, in one fixed order, before any loss.

A sampled loss sees only corrected logits (the shape of TensorFlow Recommenders' `Retrieval`
task: temperature, sampling-probability correction, accidental-hit removal, then the loss).
The order is `STEP_ORDER`; a loss names the subset it takes (`training/losses.py`):

- `magnitude`: score |h . c| instead of h . c (the absolute softmax, Blanc & Rendle 3.3).
- `temperature`: divide by the model's temperature tau.
- `log_q`: subtract each negative's `log_q` (the log of its expected count in the draw) and
  record the positive's own `pos_log_q` for the losses that weigh the positive by its noise
  probability (`nce`, `blackout`). The positive's logit itself is never shifted: it is summed
  exactly, not sampled. Skipped when the sampler reports no correction (`log_q` None).
- `accidental_hits`: a negative equal to the row's positive is masked out.
- `user_items`: a negative that is any item of the query's own training window (its history,
  and the user's later items in the window) other than its positive (a draw of the positive is
  `accidental_hits`' to mask, and nce keeps it) is masked out, when the batch carries them
  (`loss.mask_user_items`): the evaluation never ranks a user's seen items, and the later ones
  are the user's own next items. SASRec draws its negatives outside the user's sequence the
  same way. Skipped when `Batch.user_items` is None.
- `repeats`: a repeated id counts once, at its first occurrence (a Bernoulli sample is a set).

Masked negatives get the logit `finfo.min` (never -inf, which gives NaN gradients when a
whole row is masked) and `keep` False, so softmax-type losses need no mask at all and binary
losses can drop their terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from training.samplers.base import Negatives

STEP_ORDER = ("magnitude", "temperature", "log_q", "accidental_hits", "user_items", "repeats")


@dataclass(frozen=True)
class Logits:
    """One batch's logits on their way to a loss.

    Attributes:
        pos: `[N]` the positives' logits.
        neg: `[N, m]` the negatives' logits; `finfo.min` where masked.
        keep: `[N, m]` bool, False where a negative is masked.
        pos_log_q: `[N]` the positive's own log expected count under the sampler's proposal
            (0 until the `log_q` step, and where the sampler reports no correction).

    """

    pos: Tensor
    neg: Tensor
    keep: Tensor
    pos_log_q: Tensor


@dataclass(frozen=True)
class Batch:
    """What the steps may read: the draw, the positives' ids and the temperature.

    `user_items` `[N, W]`: each query's window items (0 = none), for the `user_items` step;
    None: nothing of the user's is masked.
    """

    negatives: Negatives
    positives: Tensor
    temperature: float
    user_items: Tensor | None = None


def query_windows(inputs: Tensor, targets: Tensor) -> Tensor:
    """Every item of each query's training window: `[N, L + 1]`, 0 where padding.

    Args:
        inputs: `[B, L]` the windows' inputs.
        targets: `[B, L]` their targets (0 = no target); the queries are the nonzero targets,
            in row-major order (as the training step takes them).

    """
    windows = torch.cat([inputs, targets[:, -1:]], dim=1)  # targets are inputs shifted by one
    rows = (targets != 0).nonzero()[:, 0]
    return windows[rows]


def _rows(t: Tensor, n: int) -> Tensor:
    """Broadcast a shared `[m]` tensor to `[n, m]`; `[n, m]` passes through."""
    return t.unsqueeze(0).expand(n, -1) if t.dim() == 1 else t


def _mask(logits: Logits, drop: Tensor) -> Logits:
    """Mask the negatives where `drop [N, m]` is True."""
    neg = logits.neg.masked_fill(drop, torch.finfo(logits.neg.dtype).min)
    return replace(logits, neg=neg, keep=logits.keep & ~drop)


def magnitude(logits: Logits, batch: Batch) -> Logits:
    """|o| for every logit."""
    return replace(logits, pos=logits.pos.abs(), neg=logits.neg.abs())


def temperature(logits: Logits, batch: Batch) -> Logits:
    """Divide every logit by the temperature: o / tau."""
    tau = batch.temperature
    return replace(logits, pos=logits.pos / tau, neg=logits.neg / tau)


def log_q(logits: Logits, batch: Batch) -> Logits:
    """o_d - log_q_d on the negatives; the positive's `pos_log_q` recorded, not applied."""
    neg = batch.negatives
    if neg.log_q is None or neg.pos_log_q is None:
        return logits
    n = logits.pos.shape[0]
    dtype = logits.neg.dtype
    shifted = logits.neg - _rows(neg.log_q.to(logits.neg.device, dtype), n)
    return replace(logits, neg=shifted, pos_log_q=neg.pos_log_q.to(logits.pos.device, dtype))


def accidental_hits(logits: Logits, batch: Batch) -> Logits:
    """Mask negatives equal to the row's positive."""
    ids = _rows(batch.negatives.ids.to(logits.neg.device), logits.pos.shape[0])
    return _mask(logits, ids == batch.positives.to(ids.device).unsqueeze(1))


def user_items(logits: Logits, batch: Batch) -> Logits:
    """Mask negatives that are one of the row's window items other than its positive.

    Draws of the positive are `accidental_hits`' to mask, or, for the losses that leave them
    (nce: the noise covers every item), to keep.
    """
    if batch.user_items is None:
        return logits
    ids = batch.negatives.ids.to(logits.neg.device)
    items = batch.user_items.to(ids.device)
    others = items.masked_fill(items == batch.positives.to(ids.device).unsqueeze(1), 0)
    return _mask(logits, in_rows(ids, others))


def in_rows(ids: Tensor, items: Tensor) -> Tensor:
    """Bool `[R, m]`: `ids[r, j]` (or `ids[j]`) is one of `items[r]`.

    Args:
        ids: `[m]` shared by every row, or `[R, m]` per row.
        items: `[R, W]`.

    By sorting `ids` (once when shared) and searching the items in it: O(R (m + W) log m) time
    and O(R (m + W)) memory, where comparing every pair would hold `[R, m, W]`.

    """
    rows, m = items.shape[0], ids.shape[-1]
    if m == 0:  # an empty draw (bernoulli, tapas can return one): nothing to find
        return torch.zeros(rows, 0, dtype=torch.bool, device=ids.device)
    ordered, order = ids.sort(dim=-1)
    slot = torch.searchsorted(ordered, items).clamp_max(m - 1)  # each item's leftmost copy
    found = ordered.expand(rows, m).gather(1, slot) == items
    first_hit = torch.zeros(rows, m, dtype=torch.long, device=ids.device)
    first_hit = first_hit.scatter_add_(1, slot, found.long()) > 0
    leftmost = torch.searchsorted(ordered, ordered).expand(rows, m)  # every copy: its first's
    hits = first_hit.gather(1, leftmost)
    return torch.empty_like(hits).scatter_(1, order.expand(rows, m), hits)


def first_occurrence(ids: Tensor) -> Tensor:
    """Bool, shape of `ids`: True at the first occurrence of each id along the last dim."""
    sorted_ids, order = torch.sort(ids, dim=-1, stable=True)
    first_sorted = torch.ones_like(sorted_ids, dtype=torch.bool)
    first_sorted[..., 1:] = sorted_ids[..., 1:] != sorted_ids[..., :-1]
    return torch.zeros_like(first_sorted).scatter(-1, order, first_sorted)


def repeats(logits: Logits, batch: Batch) -> Logits:
    """Mask every occurrence of an id after its first."""
    first = first_occurrence(batch.negatives.ids.to(logits.neg.device))
    return _mask(logits, ~_rows(first, logits.pos.shape[0]))


STEPS: dict[str, Callable[[Logits, Batch], Logits]] = {
    "magnitude": magnitude,
    "temperature": temperature,
    "log_q": log_q,
    "accidental_hits": accidental_hits,
    "user_items": user_items,
    "repeats": repeats,
}


def correct(pos: Tensor, neg: Tensor, batch: Batch, steps: frozenset[str]) -> Logits:
    """Apply the named `steps` to raw scores, in `STEP_ORDER`, each once.

    Args:
        pos: `[N]` raw positive scores h . c.
        neg: `[N, m]` raw negative scores.
        batch: The draw, positives and temperature.
        steps: Names from `STEP_ORDER`.

    """
    unknown = steps - set(STEP_ORDER)
    if unknown:
        raise ValueError(f"unknown correction steps {sorted(unknown)}; known: {STEP_ORDER}")
    logits = Logits(
        pos=pos,
        neg=neg,
        keep=torch.ones_like(neg, dtype=torch.bool),
        pos_log_q=torch.zeros_like(pos),
    )
    for name in STEP_ORDER:
        if name in steps:
            logits = STEPS[name](logits, batch)
    return logits
