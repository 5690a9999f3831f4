"""The kernel tree's descent to a bucket, batched over all the queries of a step.

One draw at a time (Blanc & Rendle 2018, section 3.2) a draw leaves node v for child c with
probability s(c) / (s(left) + s(right)), s(node) = max(p . z[node], floor) (0 for an empty
node), so reaching a node has the product of its path's branch probabilities. That costs two
node sums of F floats per level per draw, read again by every draw of every query.

Here the upper levels are scored whole for a block of queries at once, one `[Q, F] x [F, nodes]`
product per level (each node sum read once per block, not once per draw), and the probability
of the one-at-a-time descent reaching each node follows level by level (a node's is its parent's
times its branch's). Each query's draws then pick a node of the deepest whole level by inverse
CDF over those path probabilities (in float64): one multinomial per query, which is the marginal
of the one-at-a-time descent at that level exactly, and its log-probability is the drawn node's.
Levels too wide to score whole are descended draw by draw from there, gathering the two children
of each draw's node. A forced column (a positive's bucket) takes its own path through the same
scores, which gives its log-probability under the same procedure.
"""

from __future__ import annotations

import torch
from torch import Tensor

from training.kernel_tree.node_sums import CHUNK, NodeSums

# A gathered float costs about this many multiply-adds of a matrix product (CPU: gathers ran
# at 0.35-0.7 G floats/s, products at 40-85 G multiply-adds/s on two cores, measured).
GATHER_COST = 64


def clamped(raw: Tensor, valid: Tensor, floor: float) -> Tensor:
    """Node scores: raw estimates clamped at the floor; empty (padding) nodes exactly 0."""
    return torch.where(valid, raw.clamp_min(floor), torch.zeros_like(raw))


def whole_levels(tree: NodeSums, queries: int, cols: int) -> int:
    """How many levels under the root are scored whole for `queries` rows of `cols` draws.

    A whole level costs F multiply-adds per node and query (and one read of its sums per block
    of queries); descending it draw by draw gathers 2 F floats per draw. So a level is scored
    whole up to 2 m min(Q, GATHER_COST) nodes: for a step's thousands of queries, every level
    of a tree of millions of items.
    """
    limit = 2 * cols * min(queries, GATHER_COST)
    return sum(1 for level in tree.z[1:] if level.shape[0] <= limit)


def path_probs(tree: NodeSums, p: Tensor, levels: int) -> Tensor:
    """`[Q, nodes]` float64 probability of the one-at-a-time descent reaching each node of `levels`.

    `p [Q, F]` are the queries' normalised feature rows; each level's scores are one
    `[Q, F] x [F, nodes]` matrix product, and a node's probability is its parent's times its
    branch's (in float64: a path of floor-level branches does not underflow).
    """
    prob = p.new_ones(p.shape[0], 1, dtype=torch.float64)
    for level, valid in zip(tree.z[1 : levels + 1], tree.valid[1 : levels + 1], strict=True):
        pair = (p @ level.T).clamp_min_(tree.floor).masked_fill_(~valid, 0.0)
        pair = pair.view(p.shape[0], -1, 2)
        branch = pair.div_(pair.sum(-1, keepdim=True)).flatten(1)
        prob = prob.repeat_interleave(2, dim=1)[:, : level.shape[0]].mul_(branch)
    return prob


def pick_nodes(w: Tensor, num: int, forced: Tensor | None) -> tuple[Tensor, Tensor]:
    """`num` nodes per row by inverse CDF over the float64 weights `w [Q, T]`; `forced [Q, k]`.

    x = (1 - u) total lies in (0, total], and the first node whose CDF reaches x has a positive
    weight, so an empty node is never drawn. The float32 log-probabilities are those of this
    pick, log w - log total (the total is 1 but for float rounding); `forced` are columns m on.
    """
    cdf = w.cumsum(1)
    total = cdf[:, -1:]
    x = (1.0 - torch.rand(w.shape[0], num, dtype=w.dtype, device=w.device)) * total
    node = torch.searchsorted(cdf, x).clamp_max_(w.shape[1] - 1)
    if forced is not None:
        node = torch.cat([node, forced], 1)
    log_p = torch.log(w.gather(1, node)) - torch.log(total)
    return node, log_p.float()


def descend_gathered(
    tree: NodeSums, p: Tensor, node: Tensor, first: int, num: int, forced: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Descend `node [Q, cols]` from level `first` to the buckets one draw at a time.

    Gathers each draw's two children, O(m F) per level and query; columns m on (if `forced`,
    the forced buckets `[Q, k]`) follow their own paths. Returns buckets and their log-probs
    from `first`.
    """
    q, cols = node.shape
    log_p = p.new_zeros(q, cols)
    below = tree.depth - first
    for level, valid in zip(tree.z[first + 1 :], tree.valid[first + 1 :], strict=True):
        below -= 1
        flat = node.flatten()
        kids = level.view(-1, 2 * level.shape[1]).index_select(0, flat)
        raw = torch.bmm(kids.view(q, -1, level.shape[1]), p.unsqueeze(-1))
        ok = valid.view(-1, 2).index_select(0, flat)
        pair = clamped(raw.view(q, cols, 2), ok.view(q, cols, 2), tree.floor)
        total = pair.sum(-1)
        go_right = torch.rand(q, num, device=p.device) * total[:, :num] >= pair[:, :num, 0]
        if forced is not None:  # the forced columns draw nothing
            go_right = torch.cat([go_right, (forced >> below) & 1 == 1], 1)
        chosen = torch.where(go_right, pair[..., 1], pair[..., 0])
        log_p += torch.log(chosen) - torch.log(total)
        node = 2 * node + go_right.long()
    return node, log_p


def descend(
    tree: NodeSums, p: Tensor, num: int, forced_leaf: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """`num` buckets per query row of `p [Q, F]` and their log-probs, `[Q, m]` (`[Q, m + k]`).

    `forced_leaf [Q]` or `[Q, k]` adds columns m on the paths to those buckets, drawing
    nothing. The whole levels (`whole_levels`) are scored in blocks of queries; the rest draw
    by draw.
    """
    if forced_leaf is not None and forced_leaf.dim() == 1:
        forced_leaf = forced_leaf.unsqueeze(1)
    q, cols = p.shape[0], num + (0 if forced_leaf is None else forced_leaf.shape[1])
    if q == 0:
        return p.new_zeros(0, cols, dtype=torch.long), p.new_zeros(0, cols)
    levels = whole_levels(tree, q, cols)
    width = tree.z[levels].shape[0]
    rows = max(1, CHUNK // (8 * width + p.shape[1]))  # scores; float64 probabilities, CDF
    parts = []
    for i in range(0, q, rows):
        forced = None if forced_leaf is None else forced_leaf[i : i + rows] >> (tree.depth - levels)
        parts.append(pick_nodes(path_probs(tree, p[i : i + rows], levels), num, forced))
    node, log_p = torch.cat([a for a, _ in parts]), torch.cat([b for _, b in parts])
    if levels == tree.depth:
        return node, log_p
    rows = max(1, CHUNK // (2 * cols * p.shape[1]))
    parts = [
        descend_gathered(
            tree, p[i : i + rows], node[i : i + rows], levels, num,
            None if forced_leaf is None else forced_leaf[i : i + rows],
        )
        for i in range(0, q, rows)
    ]  # fmt: skip
    node = torch.cat([a for a, _ in parts])
    return node, log_p + torch.cat([b for _, b in parts])
