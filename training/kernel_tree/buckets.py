"""The last step of a kernel-tree draw: one item of the drawn leaf bucket (Blanc & Rendle 2018).

Inside a bucket an item is picked in proportion to its exact kernel weight K(h, c_j), computed
in the original d-dimensional space, by inverse CDF. Per-query draws either gather each draw's
b bucket rows (`pick_gathered`: O(m b d) per query) or score the whole catalogue once per
query and cumulate each bucket (`pick_scoring_all`: one [Q, d] x [d, n] product, cheaper while
n is at most a few times m b).
"""

from __future__ import annotations

import torch
from torch import Tensor

from training.kernel_tree.node_sums import NodeSums

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


def pick_gathered(tree: NodeSums, h: Tensor, leaf: Tensor, num: int, pos: Tensor | None) -> Picked:
    """Items `[Q, m]` in buckets `leaf [Q, cols]` (column m: `pos [Q]`'s bucket, if given).

    Scores the b items of each draw's bucket, `[Q, cols, b, d]` gathered rows.
    """
    rows, ok = tree.bucket_rows(leaf)  # [Q, cols, b]
    bucket_items = tree.items.index_select(0, rows.flatten()).view(*rows.shape, -1)
    weights = tree.fmap.kernel(torch.einsum("qmbd,qd->qmb", bucket_items, h))
    slot, log_w = pick_in_bucket(weights[:, :num].flatten(0, 1), ok[:, :num].flatten(0, 1))
    ids = rows[:, :num].flatten(0, 1).gather(1, slot.unsqueeze(-1)).view(-1, num)
    if pos is None:
        return ids, log_w.view(-1, num), None
    mine = masked(weights[:, num], ok[:, num])
    return ids, log_w.view(-1, num), log_share(mine, (pos - 1) % tree.b)


def pick_scoring_all(
    tree: NodeSums, h: Tensor, leaf: Tensor, num: int, pos: Tensor | None
) -> Picked:
    """As `pick_gathered`, from the kernel weights of all n items and their bucket CDFs.

    The weights (clamped at TINY, 0 on the last bucket's padding) are cumulated within each
    bucket once per query; a draw gathers only its bucket's b-long CDF and finds its slot by
    binary search.
    """
    q, buckets, b, n = h.shape[0], tree.z[-1].shape[0], tree.b, tree.num_items
    padded = torch.cat([tree.items[1:], tree.items.new_zeros(buckets * b - n, h.shape[1])])
    weights = tree.fmap.pairwise_kernel(h, padded).clamp_min_(TINY)  # [Q, buckets b]
    weights[:, n:] = 0.0
    cdf = weights.view(-1, b).cumsum(-1)  # [Q buckets, b]
    first = torch.arange(q, device=h.device).unsqueeze(-1) * buckets
    drawn = cdf.index_select(0, (first + leaf[:, :num]).flatten())  # [Q m, b]
    total = drawn[:, -1:]
    slot = torch.searchsorted(drawn, torch.rand_like(total) * total).squeeze(1)
    ids = (leaf[:, :num] * b + slot.view(q, num)).clamp_max_(n - 1)  # 0-based
    log_w = torch.log(weights.gather(1, ids)) - torch.log(total.view(q, num))
    if pos is None:
        return ids + 1, log_w, None
    pos_total = cdf[first.squeeze(-1) + (pos - 1) // b, -1]
    pos_w = weights.gather(1, (pos - 1).unsqueeze(-1)).squeeze(-1)
    return ids + 1, log_w, torch.log(pos_w) - torch.log(pos_total)
