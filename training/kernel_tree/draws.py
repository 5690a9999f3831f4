"""Draws from the kernel tree (Blanc & Rendle 2018, section 3.2) and their exact probabilities.

A draw descends from the root, taking the left child with probability s(left) / (s(left) +
s(right)), s(node) = max(p . z[node], floor) (0 for empty nodes), then picks an item in its
bucket with probability proportional to the exact kernel K(h, c_j), computed in the original
d-dimensional space. The log-probability returned is that of this procedure exactly (branch
log-probabilities + the leaf log-probability), clamping included. Per-query draws share the
work of a step without changing that distribution: `descent` scores the upper levels for all
queries at once, `buckets.pick_grouped` scores each drawn bucket once per (bucket, query).

Shared draws come from the batch's summed kernel, q_j proportional to sum_b K(h_b, c_j): the
mixture of the B per-query distributions weighted by their masses Z_b. Its node masses are
linear in z, sum_b phi(h_b) . z = B p_bar . z with p_bar = mean_b phi(h_b), so the descent runs
once with p_bar (O(F) per node, not O(B F); the code divides p_bar by the batch's clamped mean
mass, which scales every node alike); inside a bucket the weight of item j is
sum_b K(h_b, c_j). With an exact kernel and no clamping this is the summed kernel exactly.
Mass weights rather than equal ones: equal weights divide by each query's own Z_b, and an RFF
estimate of one query's mass can be near 0 or negative (on a trained amazon-beauty model, 0.01
to 2.1 times the exact mass, one of 512 below 0), which handed that query almost the whole
mixture; the batch's summed mass is a mean of B estimates and stays well inside its range.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.profiler import record_function

from training.kernel_tree.buckets import TINY, log_share, masked, pick_grouped, pick_in_bucket
from training.kernel_tree.descent import clamped, descend
from training.kernel_tree.node_sums import CHUNK, NodeSums


class KernelTree(NodeSums):
    """Sample items in O(F log(n / b) + b d) per draw from the kernel distribution of its sums."""

    def _per_query_vectors(self, h: Tensor) -> Tensor:
        """`[B, F]` rows phi(h_b) / Z_b: node scores are then each query's probabilities.

        Dividing by the clamped total mass Z_b makes the floor mean the same for every query.
        """
        phi = self.fmap.features(h)
        mass = (phi @ self.z[0][0]).clamp_min(self.floor)
        return phi / mass.unsqueeze(-1)

    def _summed_vector(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """The summed kernel's `[1, F]` p_bar = mean_b phi(h_b) / Z_bar and bucket weights `[B]`.

        mean_b phi(h_b) is a weighted feature sum that the map computes without B rows of F
        features (for the quadratic map, one [d, B] x [B, d] product instead of B x (d^2 + 1)
        numbers); the bucket weights coef_b = 1 / (B Z_bar) put K(h_b, c_j) on the same scale.
        """
        mean = torch.full((1, h.shape[0]), 1.0 / h.shape[0], dtype=h.dtype, device=h.device)
        p_sum = self.fmap.bucket_sums(h.unsqueeze(0), mean)
        mass = (p_sum @ self.z[0][0]).clamp_min(self.floor)
        return p_sum / mass, mean[0] / mass

    @torch.no_grad()
    def sample(
        self, h: Tensor, num: int, shared: bool, positives: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Draw `num` items with replacement.

        Args:
            h: `[B, d]` query embeddings (L2-normalised for the RFF kernel).
            num: Draws m.
            shared: One set `[m]` from the batch's summed kernel, else `[B, m]` per query.
            positives: Optional `[B]` item_idx whose one-draw log-probabilities to return
                too (each under its own query's distribution, or the summed one if shared).
                Per query they ride along the draws' descent: one extra column of m.

        Returns:
            item_idx (int64), the log-probability of each draw (`[m]` or `[B, m]`), and
            the positives' `[B]` (None without `positives`).

        """
        h = h.detach().to(self.items)
        if shared:
            ids, log_p = self._sample_shared(h, *self._summed_vector(h), num)
            pos = None if positives is None else self.log_prob(h, positives, shared=True)
            return ids, log_p, pos
        pos = None if positives is None else positives.to(self.items.device)
        forced = None if pos is None else (pos - 1) // self.b
        with record_function("kernel_tree.descent"):
            leaf, log_p = descend(self, self._per_query_vectors(h), num, forced)
        with record_function("kernel_tree.bucket_pick"):
            ids, log_w, pos_log_w = pick_grouped(self, h, leaf, num, pos)
        pos_log_p = None if pos_log_w is None else log_p[:, num] + pos_log_w
        return ids, log_p[:, :num] + log_w, pos_log_p

    @torch.no_grad()
    def sample_grouped(
        self, h: Tensor, groups: Tensor, num: int, positives: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """`num` draws per group of queries (a history's positions), shared by its queries.

        Group s draws from its summed kernel sum_{t in s} K(h_t, c), the mixture of its
        queries' kernel distributions weighted by their masses, as the batch's shared draws
        do for the whole batch: one descent with p_s = mean_t phi(h_t) / Z_s, bucket weights
        sum_t K(h_t, c_j) / (L_s Z_s). Each positive rides along as a forced column of its
        group's descent, so its log-probability is under its own group's proposal.

        Args:
            h: `[N, d]` query embeddings.
            groups: `[N]` a group id per query (any integers).
            num: Draws m per group.
            positives: `[N]` item_idx of each query's positive.

        Returns:
            item_idx `[N, m]` and their log-probabilities `[N, m]` (every row of a group is
            its group's), and the positives' `[N]`.

        """
        if h.shape[0] == 0:  # nothing to group
            return h.new_zeros(0, num, dtype=torch.long), h.new_zeros(0, num), h.new_zeros(0)
        rows, mean, pos, at = self._by_group(h.detach().to(self.items), groups, positives)
        p_sum = self.fmap.bucket_sums(rows, mean)
        mass = (p_sum @ self.z[0][0]).clamp_min(self.floor).unsqueeze(1)
        with record_function("kernel_tree.descent"):
            leaf, log_p = descend(self, p_sum / mass, num, (pos - 1) // self.b)
        with record_function("kernel_tree.bucket_pick"):
            ids, log_w, pos_log_w = pick_grouped(self, rows, leaf, num, pos, mean / mass)
        assert pos_log_w is not None
        log_p, pos_log_p = log_p[:, :num] + log_w, log_p[:, num:] + pos_log_w
        return ids[at[0]], log_p[at[0]], pos_log_p[at]

    def _by_group(
        self, h: Tensor, groups: Tensor, positives: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, tuple[Tensor, Tensor]]:
        """Queries laid out by group: rows `[S, L, d]`, weights `[S, L]`, positives `[S, L]`.

        A group's weights are 1 / L_s (0 at padding, whose rows are 0 and whose positive is
        the group's first, unused); also each query's place (group, slot).
        """
        _, group, counts = torch.unique(
            groups.to(h.device), return_inverse=True, return_counts=True
        )
        order = torch.argsort(group, stable=True)
        slot = torch.empty_like(group)
        first = (counts.cumsum(0) - counts)[group[order]]
        slot[order] = torch.arange(group.numel(), device=h.device) - first
        at, shape = (group, slot), (counts.numel(), int(counts.max()))
        rows = h.new_zeros(*shape, h.shape[1]).index_put_(at, h)
        mean = h.new_zeros(shape).index_put_(at, 1.0 / counts[group].to(h))
        pos = torch.zeros(shape, dtype=torch.long, device=h.device)
        pos = pos.index_put_(at, positives.to(h.device))
        return rows, mean, torch.where(mean > 0, pos, pos[:, :1]), at

    def _sample_shared(self, h: Tensor, p: Tensor, coef: Tensor, num: int) -> tuple[Tensor, Tensor]:
        """Shared draws `[m]` from the summed kernel: one descent with p_bar, summed weights."""
        leaf, log_p = descend(self, p, num)
        uniq, inverse = torch.unique(leaf[0], return_inverse=True)
        rows, ok = self.bucket_rows(uniq)  # [U, b]
        bucket_items = self.items.index_select(0, rows.flatten())
        weights = self.fmap.mixture_kernel(h, coef, bucket_items).view_as(rows)
        slot, log_w = pick_in_bucket(weights[inverse], ok[inverse])
        ids = rows[inverse, slot]
        return ids, log_p[0] + log_w

    @torch.no_grad()
    def log_prob_all(self, h: Tensor, shared: bool = False) -> Tensor:
        """Brute force, O(n F): the log-probability of every item under `sample`'s procedure.

        Returns:
            `[B, n + 1]` per query (or `[1, n + 1]` for the shared draws); column 0 is -inf.

        """
        h = h.detach().to(self.items)
        items = self.items[1:]
        if shared:
            p, coef = self._summed_vector(h)
            step = max(1, CHUNK // h.shape[0])
            parts = [
                self.fmap.mixture_kernel(h, coef, items[i : i + step])
                for i in range(0, items.shape[0], step)
            ]
            weights = torch.cat(parts).unsqueeze(0)
        else:
            p = self._per_query_vectors(h)
            weights = self.fmap.pairwise_kernel(h, items)
        log_node = torch.zeros(p.shape[0], 1, device=p.device)
        for level, valid in zip(self.z[1:], self.valid[1:], strict=True):
            pair = clamped(p @ level.T, valid, self.floor).view(p.shape[0], -1, 2)
            log_branch = (torch.log(pair) - torch.log(pair.sum(-1, keepdim=True))).flatten(1)
            parent = torch.arange(level.shape[0], device=p.device) // 2
            log_node = log_node[:, parent] + log_branch
        weights = weights.clamp_min(TINY)
        leaf = torch.arange(self.num_items, device=p.device) // self.b
        bucket_mass = torch.zeros(p.shape[0], log_node.shape[1], device=p.device)
        bucket_mass.index_add_(1, leaf, weights)
        log_items = log_node[:, leaf] + torch.log(weights) - torch.log(bucket_mass[:, leaf])
        pad = torch.full((p.shape[0], 1), -math.inf, device=p.device)
        return torch.cat([pad, log_items], dim=1)

    @torch.no_grad()
    def log_prob(self, h: Tensor, ids: Tensor, shared: bool = False) -> Tensor:
        """O((F + b d) log n) per query: the log-probability of one draw being `ids [B]`.

        Row b is `ids[b]`'s probability under query b's own distribution (or, `shared`, under
        the batch's summed kernel): the branch log-probabilities down to its bucket plus its
        share of the bucket's kernel weight, exactly as `sample` and `log_prob_all` compute.
        """
        h = h.detach().to(self.items)
        ids = ids.to(self.items.device)
        if shared:
            p_bar, coef = self._summed_vector(h)
            p = p_bar.expand(ids.shape[0], -1)
        else:
            p = self._per_query_vectors(h)
        leaf = (ids - 1) // self.b
        depth = len(self.z) - 1
        log_p = torch.zeros(ids.shape[0], device=p.device)
        for level in range(1, depth + 1):
            node = leaf >> (depth - level)
            pair = torch.stack([node ^ (node & 1), node | 1], dim=1)  # [B, 2]: left, right
            s = (p.unsqueeze(1) * self.z[level][pair]).sum(-1)
            s = clamped(s, self.valid[level][pair], self.floor)
            log_p += torch.log(s.gather(1, (node & 1).unsqueeze(1))[:, 0]) - torch.log(s.sum(1))
        rows, ok = self.bucket_rows(leaf)  # [B, b]
        if shared:
            weights = self.fmap.mixture_kernel(h, coef, self.items[rows.flatten()]).view_as(rows)
        else:
            weights = self.fmap.kernel(torch.einsum("qbd,qd->qb", self.items[rows], h))
        return log_p + log_share(masked(weights, ok), ids - 1 - leaf * self.b)
