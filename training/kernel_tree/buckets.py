"""The last step of a kernel-tree draw: one item of the drawn leaf bucket (Blanc & Rendle 2018).

Inside a bucket an item is picked in proportion to its exact kernel weight K(h, c_j), computed
in the original d-dimensional space, by inverse CDF. Per-query draws (`pick_grouped`) are
grouped by bucket over all the queries of a step: the distinct (bucket, query) pairs of one
bucket score its b items in one `[pairs, d] x [d, b]` product, so each bucket's rows are read
once per step and each query's vector once per pair, however many draws share the pair.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from training.kernel_tree.node_sums import CHUNK, NodeSums

TINY = 1e-30  # keeps a bucket's exact kernel weights from summing to 0 after underflow


def masked(weights: Tensor, ok: Tensor) -> Tensor:
    """Bucket weights `[R, b]` kept off 0 by TINY, exactly 0 at padding slots."""
    return torch.where(ok, weights.clamp_min(TINY), torch.zeros_like(weights))


def log_share(w: Tensor, slot: Tensor) -> Tensor:
    """`[R]` log of slot `slot [R]`'s share of its row of masked bucket weights `[R, b]`."""
    return torch.log(w.gather(1, slot.unsqueeze(-1)).squeeze(-1)) - torch.log(w.sum(1))


def pick_in_bucket(weights: Tensor, ok: Tensor) -> tuple[Tensor, Tensor]:
    """Draw one slot per row of `weights [R, b]`; returns slots `[R]` and log-probs `[R]`."""
    w = masked(weights, ok)
    cdf = torch.cumsum(w, dim=1)
    total = cdf[:, -1:]
    # Inverse CDF: the first slot whose cumulative weight reaches u (cheaper than
    # multinomial's exponentials); the clamp guards against u rounding past the last slot.
    slot = (cdf < torch.rand_like(total) * total).sum(1)
    slot = torch.minimum(slot, ok.sum(1) - 1)
    return slot, log_share(w, slot)


Picked = tuple[Tensor, Tensor, Tensor | None]  # item_idx [Q, m], their log shares, positives' [Q]
SLACK = 1.25  # buckets batched in one bmm have counts within this factor (padding < 25%)


class Pairs(NamedTuple):
    """A step's draws sorted by (bucket, query), and their distinct (bucket, query) pairs."""

    order: Tensor  # [D] the draws (flat indices of [Q, cols]) in (bucket, query) order
    pair: Tensor  # [D] the pair of each sorted draw
    query: Tensor  # [P] each pair's query row
    bucket: Tensor  # [U] the distinct buckets
    pair_start: Tensor  # [U] each bucket's first pair
    pair_count: Tensor  # [U] its number of pairs
    draw_start: Tensor  # [U] its first sorted draw
    draw_count: Tensor  # [U] its number of draws


def pairs_of(leaf: Tensor) -> Pairs:
    """Sort the draws `leaf [Q, cols]` by (bucket, query) once; everything else is ranges."""
    q = leaf.shape[0]
    key, order = torch.sort((leaf * q + torch.arange(q, device=leaf.device)[:, None]).flatten())
    fresh = torch.ones_like(key, dtype=torch.bool)
    fresh[1:] = key[1:] != key[:-1]
    pair_key = key[fresh]
    bucket, count = torch.unique_consecutive(pair_key // q, return_counts=True)
    draws = torch.unique_consecutive(key // q, return_counts=True)[1]
    return Pairs(
        order, torch.cumsum(fresh, 0) - 1, pair_key % q, bucket,
        torch.cumsum(count, 0) - count, count, torch.cumsum(draws, 0) - draws, draws,
    )  # fmt: skip


def bins(count: Tensor, width: int) -> list[Tensor]:
    """Buckets (indices into `count [U]`) batched in one bmm each, largest counts first.

    A bin's counts lie within SLACK of its largest, and it holds at most CHUNK floats of
    `width` per padded pair.
    """
    if count.numel() == 0:
        return []
    order = torch.argsort(count, descending=True, stable=True)
    sizes = count[order].tolist()
    out, first = [], 0
    for i, size in enumerate(sizes):
        top = sizes[first]
        if i > first and (size * SLACK < top or (i - first + 1) * top * width > CHUNK):
            out.append(order[first:i])
            first = i
    out.append(order[first:])
    return out


def pick_grouped(
    tree: NodeSums,
    h: Tensor,
    leaf: Tensor,
    num: int,
    pos: Tensor | None,
    coef: Tensor | None = None,
) -> Picked:
    """Items `[Q, m]` in buckets `leaf [Q, cols]` (columns m on: `pos [Q]` or `[Q, k]`'s).

    A row's weights are the exact kernel of its query `h [Q, d]`, or, with `coef [Q, R]`, the
    mixture sum_r coef_r K(h_r, c) of its R queries `h [Q, R, d]` (a history's positions).
    Each bin of buckets scores its pairs in one `[G, c R, d] x [G, d, b]` bmm; each draw then
    finds its slot in its pair's CDF (`pick_slots`; the forced columns take the positives').
    Returns ids, log shares `[Q, m]` and the positives' `[Q]` (`[Q, k]`).
    """
    q, cols = leaf.shape
    pairs = pairs_of(leaf)
    fixed = torch.full((q, cols), -1, dtype=torch.long, device=leaf.device)
    if pos is not None:
        fixed[:, num:] = ((pos - 1) % tree.b).view(q, cols - num)
    fixed = fixed.flatten()[pairs.order]
    slots, log_w = torch.empty_like(fixed), torch.empty(fixed.shape, device=leaf.device)
    width = (1 if coef is None else coef.shape[1]) * (h.shape[-1] + tree.b) + 2 * tree.b
    for group in bins(pairs.pair_count, width):
        idx, _ = bin_pairs(pairs, group)
        draws, cell = bin_draws(pairs, group, idx.shape[1])
        weights = bin_weights(tree, h, coef, pairs.query[idx], pairs.bucket[group])
        slots[draws], log_w[draws] = pick_slots(weights, cell, fixed[draws])
    unsorted = torch.empty_like(slots).index_copy_(0, pairs.order, slots)
    log_w = torch.empty_like(log_w).index_copy_(0, pairs.order, log_w).view(q, cols)
    ids = (leaf.flatten() * tree.b + unsorted + 1).view(q, cols)
    pos_log_w = None if pos is None else log_w[:, num:].view(pos.shape)
    return ids[:, :num], log_w[:, :num], pos_log_w


def bin_draws(pairs: Pairs, group: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """The sorted draws of a bin's buckets, and each one's row in the bin's `[G width, b]`.

    Its pair's row: the pairs of the bin's g-th bucket fill rows g width onwards.
    """
    lens = pairs.draw_count[group]
    g = torch.repeat_interleave(torch.arange(group.numel(), device=group.device), lens)
    before = torch.cumsum(lens, 0) - lens
    draws = pairs.draw_start[group][g] + torch.arange(g.numel(), device=g.device) - before[g]
    return draws, g * width + pairs.pair[draws] - pairs.pair_start[group][g]


def pick_slots(weights: Tensor, rows: Tensor, fixed: Tensor) -> tuple[Tensor, Tensor]:
    """One slot per draw by inverse CDF of its row `rows [k]` of `weights [R, b]`, log shares.

    A draw with `fixed >= 0` takes that slot (a positive's). The CDF is searched in two steps,
    the ends of its blocks of s (a power of two near sqrt(b)) then one block, so a draw gathers
    about 2 sqrt(b) floats, not its row's b. x = u total with u in (0, 1]: the first slot whose
    CDF reaches x has a positive weight.
    """
    b = weights.shape[1]
    s = 1 << max(0, math.ceil(math.log2(b) / 2))
    blocks = -(-b // s)
    cdf = weights.cumsum(1)
    if blocks * s > b:  # flat past the last slot
        cdf = torch.cat([cdf, cdf[:, -1:].expand(-1, blocks * s - b)], 1)
    total = cdf[:, -1].index_select(0, rows)
    x = ((1.0 - torch.rand(rows.shape, device=rows.device)) * total).unsqueeze(1)
    ends = cdf[:, s - 1 :: s].contiguous()  # [R, blocks]
    block = torch.searchsorted(ends.index_select(0, rows), x).squeeze(1).clamp_max_(blocks - 1)
    fine = cdf.view(-1, s).index_select(0, rows * blocks + block)  # [k, s]
    within = torch.searchsorted(fine, x).squeeze(1).clamp_max_(s - 1)
    slot = torch.where(fixed >= 0, fixed, (block * s + within).clamp_max_(b - 1))
    return slot, torch.log(weights.view(-1).index_select(0, rows * b + slot)) - torch.log(total)


def bin_pairs(pairs: Pairs, group: Tensor) -> tuple[Tensor, Tensor]:
    """`[G, c]` pair indices of the bin's buckets (padding repeats a bucket's last pair), mask."""
    start, count = pairs.pair_start[group], pairs.pair_count[group]
    j = torch.arange(int(count.max()), device=count.device)
    ok = j < count.unsqueeze(1)
    return start.unsqueeze(1) + torch.minimum(j, count.unsqueeze(1) - 1), ok


def bin_weights(
    tree: NodeSums, h: Tensor, coef: Tensor | None, queries: Tensor, buckets: Tensor
) -> Tensor:
    """`[G c, b]` exact kernel weights of a bin's pairs: `queries [G, c]` in `buckets [G]`.

    With `coef`, each pair's weights are its queries' mixture (`pick_grouped`). TINY-clamped,
    and 0 at the padding slots of the last bucket.
    """
    rows, ok = tree.bucket_rows(buckets)  # [G, b]
    left = h.index_select(0, queries.flatten()).view(queries.shape[0], -1, h.shape[-1])
    right = tree.items.index_select(0, rows.flatten()).view(*rows.shape, -1)
    weights = tree.fmap.grouped_kernel(left, right)  # [G, c R, b]
    if coef is not None:
        mix = coef.index_select(0, queries.flatten()).view(*queries.shape, -1, 1)  # [G, c, R, 1]
        weights = (weights.view(*mix.shape[:3], -1) * mix).sum(2)
    weights = weights.clamp_min_(TINY)
    if not bool(ok.all()):  # the last bucket's padding slots
        weights.masked_fill_(~ok.unsqueeze(1), 0.0)
    return weights.flatten(0, 1)
