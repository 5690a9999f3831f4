"""The node sums of the divide-and-conquer kernel tree (Blanc & Rendle 2018, section 3.2).

Items 1..n sit in leaf buckets of b consecutive item_idx. A binary tree over the buckets is kept
level by level: `z[l]` is `[nodes_l, F]`, the sums of phi(c) of the items under each node (levels
of odd size get one empty padding node). `NodeSums` builds them and keeps them in step with the
item table; `draws.KernelTree` samples from them.

Memory: the item table `[n + 1, d]` plus about 2 (n / b) F floats for the node sums.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from training.feature_maps import FeatureMap

CHUNK = 1 << 24  # floats per temporary block (64 MiB)
# floats per block of item features (16 MiB): a block this size is reused from the heap at
# the next block, where a 64 MiB one is fresh pages every time (a rebuild 20% slower, measured)
FEATURE_CHUNK = 1 << 22
# a changed row's phi delta costs about as much as this many re-summed rows: two feature rows
# and their gathers and accumulation (at 546k items, F = 2048: 63 against 33 us a row, measured)
DELTA_COST = 4


class NodeSums:
    """Feature sums of every tree node over an item table: rebuilt whole or updated by rows."""

    def __init__(self, fmap: FeatureMap, leaf_size: int, floor: float = 1e-6) -> None:
        """Configure an empty tree; call `rebuild` before sampling.

        Args:
            fmap: Kernel feature map (F = fmap.dim features).
            leaf_size: Items per leaf bucket b.
            floor: Smallest score of a non-empty node, in units of the query's total mass.

        """
        self.fmap = fmap
        self.b = int(leaf_size)
        self.floor = float(floor)
        self.items = torch.empty(0)
        self.z: list[Tensor] = []  # level 0 = root ... level H = leaf buckets
        self.valid: list[Tensor] = []

    @property
    def num_items(self) -> int:
        """Catalogue size n (valid item_idx are 1..n)."""
        return int(self.items.shape[0]) - 1

    @property
    def depth(self) -> int:
        """H, the number of branching steps from the root to a bucket."""
        return len(self.z) - 1

    def memory_bytes(self) -> int:
        """Bytes held by the node sums and the item table."""
        tensors = [*self.z, self.items]
        return sum(t.numel() * t.element_size() for t in tensors)

    @torch.no_grad()
    def rebuild(self, item_emb: Tensor) -> None:
        """Recompute every node sum from `item_emb [n + 1, d]` (row 0 is padding, ignored)."""
        self.items = item_emb.detach().to(torch.float32).clone()
        self._resum()

    def _resum(self) -> None:
        """Every node sum from the item table as it is: O(n F)."""
        leaves = math.ceil(self.num_items / self.b)
        if leaves < 1:
            raise ValueError("the kernel tree needs at least one item")
        level = self._bucket_sums(torch.arange(leaves, device=self.items.device))
        valid = torch.ones(leaves, dtype=torch.bool, device=level.device)
        self.z, self.valid = [], []
        while True:
            if level.shape[0] > 1 and level.shape[0] % 2:
                level = torch.cat([level, level.new_zeros(1, level.shape[1])])
                valid = torch.cat([valid, valid.new_zeros(1)])
            self.z.insert(0, level)
            self.valid.insert(0, valid)
            if level.shape[0] == 1:
                break
            level = level.view(-1, 2, level.shape[1]).sum(1)
            valid = valid.view(-1, 2).any(1)

    def _bucket_sums(self, buckets: Tensor) -> Tensor:
        """`[U, F]` sums of phi over buckets `buckets [U]`, computed in memory-bounded chunks."""
        per_chunk = max(1, FEATURE_CHUNK // (self.b * self.fmap.dim))
        out = []
        for first in range(0, buckets.numel(), per_chunk):
            rows, ok = self.bucket_rows(buckets[first : first + per_chunk])
            out.append(self.fmap.bucket_sums(self.items[rows], ok.to(self.items.dtype)))
        return torch.cat(out)

    def bucket_rows(self, leaf: Tensor) -> tuple[Tensor, Tensor]:
        """item_idx `[..., b]` of buckets `leaf [...]` (clamped to n) and their validity mask."""
        rows = 1 + leaf.unsqueeze(-1) * self.b + torch.arange(self.b, device=leaf.device)
        ok = rows <= self.num_items
        return rows.clamp_max(self.num_items), ok

    @torch.no_grad()
    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Set rows `item_idx [k]` to `item_emb [k, d]`; re-sum only what they touch.

        A repeated id takes its last row. Each touched bucket is re-summed from its b rows,
        or, when fewer than b / DELTA_COST of them changed, moved by their phi deltas (two
        feature rows each, old and new, gathered and accumulated). Then each touched bucket's
        ancestors are re-summed from their two children, level by level. O(min(n, 2 k) F +
        k F log(n / b)); nothing untouched is read but the sibling sums.
        """
        idx, emb = self._last_rows(item_idx, item_emb)
        if idx.numel() == 0:
            return
        leaf = (idx - 1) // self.b
        buckets, changed = torch.unique(leaf, return_counts=True)
        size = torch.clamp(self.num_items - buckets * self.b, max=self.b)  # the last is short
        whole = buckets[DELTA_COST * changed >= size]
        resummed = torch.isin(leaf, whole)
        self._add_deltas(idx[~resummed], emb[~resummed])
        self.items[idx[resummed]] = emb[resummed]
        if whole.numel():
            self.z[-1][whole] = self._bucket_sums(whole)
        self._resum_ancestors(buckets)

    def _last_rows(self, item_idx: Tensor, item_emb: Tensor) -> tuple[Tensor, Tensor]:
        """Distinct ids `[k]` (sorted) and the last of their rows `[k, d]`, ids checked."""
        item_idx = item_idx.to(self.items.device).long()
        item_emb = item_emb.detach().to(self.items)
        uniq, inverse = torch.unique(item_idx, return_inverse=True)
        order = torch.arange(item_idx.numel(), device=item_idx.device)
        last = torch.full_like(uniq, -1).scatter_reduce(0, inverse, order, "amax")
        if uniq.numel() and (uniq.min() < 1 or uniq.max() > self.num_items):
            raise IndexError(f"item_idx outside 1..{self.num_items}")
        return uniq, item_emb[last]

    def _add_deltas(self, idx: Tensor, emb: Tensor) -> None:
        """Move the bucket sums of rows `idx` by phi(new) - phi(old); set the rows."""
        step = max(1, FEATURE_CHUNK // self.fmap.dim)
        for first in range(0, idx.numel(), step):
            rows, new = idx[first : first + step], emb[first : first + step]
            if self.fmap.grouped_sums:
                leaf, old_rows, new_rows, weight = self._group_by_bucket(rows, new)
                delta = self.fmap.bucket_sums(new_rows, weight)
                delta -= self.fmap.bucket_sums(old_rows, weight)
            else:
                leaf = (rows - 1) // self.b
                delta = self.fmap.features(new).sub_(self.fmap.features(self.items[rows]))
            self.items[rows] = new
            # not index_add_: on two busy CPU threads it took 40x its one-thread time (measured)
            self.z[-1].index_put_((leaf,), delta, accumulate=True)

    def _resum_ancestors(self, nodes: Tensor) -> None:
        """Re-sum the ancestors of buckets `nodes [U]` (sorted, distinct) from their children."""
        for parent_level, level in zip(reversed(self.z[:-1]), reversed(self.z[1:]), strict=True):
            nodes = torch.unique_consecutive(nodes // 2)
            pairs = level.view(-1, 2, level.shape[1]).index_select(0, nodes)
            parent_level[nodes] = pairs.sum(1)

    def _group_by_bucket(self, rows: Tensor, new: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Pack changed rows by bucket: buckets `[U]`, old and new `[U, c, d]`, mask `[U, c]`.

        c is the most changed rows in one bucket, so per-bucket feature sums (an outer-product
        sum for the quadratic map) replace one F-sized feature row per changed item.
        """
        order = torch.argsort((rows - 1) // self.b)
        rows, new = rows[order], new[order]
        leaf, inverse, counts = torch.unique_consecutive(
            (rows - 1) // self.b, return_inverse=True, return_counts=True
        )
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(rows.numel(), device=rows.device) - starts[inverse]
        shape = (leaf.numel(), int(counts.max()), new.shape[1])
        old_rows, new_rows = new.new_zeros(shape), new.new_zeros(shape)
        old_rows[inverse, slot] = self.items[rows]
        new_rows[inverse, slot] = new
        weight = new.new_zeros(shape[:2])
        weight[inverse, slot] = 1.0
        return leaf, old_rows, new_rows, weight
