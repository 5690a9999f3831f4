"""Draws from the kernel tree (Blanc & Rendle 2018, section 3.2) and their exact probabilities.

A draw descends from the root, taking the left child with probability s(left) / (s(left) +
s(right)), s(node) = max(p . z[node], floor) (0 for empty nodes), then picks an item in its
bucket with probability proportional to the exact kernel K(h, c_j), computed in the original
d-dimensional space. The log-probability returned is that of this procedure exactly (branch
log-probabilities + the leaf log-probability), clamping included.

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

from training.kernel_tree.buckets import (
    TINY,
    log_share,
    masked,
    pick_gathered,
    pick_in_bucket,
    pick_scoring_all,
)
from training.kernel_tree.node_sums import CHUNK, NodeSums

_GATHER_COST = 16  # multiply-adds of a matrix product per gathered float (CPU, measured order)
_SCORE_ALL_FACTOR = 16  # per-query draws score all n items when n <= this * m * b


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

    def _scores(self, s: Tensor, valid: Tensor) -> Tensor:
        """Clamp raw node scores at the floor; empty (padding) nodes score exactly 0."""
        return torch.where(valid, s.clamp_min(self.floor), torch.zeros_like(s))

    def _whole_levels_up_to(self, queries: int, num: int) -> int:
        """Levels of at most this many nodes are scored whole in `_descend`, deeper ones gathered.

        Scoring a whole level is one [Q, F] x [F, nodes] product that reads the level once;
        gathering each draw's two children reads 2 F floats per draw, Q m of them. A matrix
        product does ~16 multiply-adds in the time of one gathered float, so the whole level
        is cheaper up to about 2 m min(Q, 16) nodes (2 m for the single shared row).
        """
        return 2 * num * min(queries, _GATHER_COST)

    def _rows_per_chunk(self, num: int, bucket_floats: int) -> int:
        """Query rows per block of per-query draws, keeping temporaries near CHUNK floats.

        With at least _GATHER_COST rows and a tree no deeper than `_whole_levels_up_to`,
        `_descend` scores every level whole and a row holds only its F features and node
        scores; otherwise each gathered level holds the two children of m draws, 2 m F floats.
        """
        leaves = self.z[-1].shape[0]
        if leaves <= self._whole_levels_up_to(_GATHER_COST, num):
            rows = CHUNK // (self.fmap.dim + leaves + bucket_floats)
            if rows >= _GATHER_COST:
                return rows
        return max(1, CHUNK // (num * 2 * self.fmap.dim + bucket_floats))

    def _descend(
        self, p: Tensor, num: int, forced_leaf: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Descend `num` draws per query row of `p [Q, F]`: buckets `[Q, m]`, their log-probs.

        `forced_leaf [Q]` adds a column m that takes the path to that bucket instead of
        drawing, so its log-probability comes from the same node scores as the draws'.
        """
        q, cols = p.shape[0], num + (forced_leaf is not None)
        node = torch.zeros(q, cols, dtype=torch.long, device=p.device)
        log_p = torch.zeros(q, cols, device=p.device)
        whole_up_to = self._whole_levels_up_to(q, cols)
        below = len(self.z) - 1  # levels under the current one, down to the buckets
        for level, valid in zip(self.z[1:], self.valid[1:], strict=True):
            below -= 1
            if level.shape[0] <= whole_up_to:  # score the whole level
                s = self._scores(p @ level.T, valid).view(q, -1, 2)
                pair = torch.gather(s, 1, node.unsqueeze(-1).expand(-1, -1, 2))
            else:  # gather the two children of each draw's node: O(m F)
                flat = node.flatten()
                kids = level.view(-1, 2 * level.shape[1]).index_select(0, flat)
                raw = torch.bmm(kids.view(q, -1, level.shape[1]), p.unsqueeze(-1))
                ok = valid.view(-1, 2).index_select(0, flat)
                pair = self._scores(raw.view(q, cols, 2), ok.view(q, cols, 2))
            total = pair.sum(-1)
            go_right = torch.rand(q, num, device=p.device) * total[:, :num] >= pair[:, :num, 0]
            if forced_leaf is not None:  # the forced column draws nothing
                go_right = torch.cat([go_right, ((forced_leaf >> below) & 1 == 1)[:, None]], 1)
            chosen = torch.where(go_right, pair[..., 1], pair[..., 0])
            log_p += torch.log(chosen) - torch.log(total)
            node = 2 * node + go_right.long()
        return node, log_p

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
        p = self._per_query_vectors(h)
        cols = num + (positives is not None)
        score_all = self.num_items <= _SCORE_ALL_FACTOR * cols * self.b
        # scoring all: each row's weights and their CDF (2 n) and its draws' CDFs (m b)
        bucket_floats = (
            2 * self.num_items + cols * self.b if score_all else cols * self.b * h.shape[1]
        )
        per_chunk = self._rows_per_chunk(cols, bucket_floats)
        pos = None if positives is None else positives.to(self.items.device)
        parts = [
            self._sample_rows(
                h[i : i + per_chunk],
                p[i : i + per_chunk],
                num,
                score_all,
                None if pos is None else pos[i : i + per_chunk],
            )
            for i in range(0, h.shape[0], per_chunk)
        ]
        pos_log_p = None if pos is None else torch.cat([c for _, _, c in parts if c is not None])
        return torch.cat([a for a, _, _ in parts]), torch.cat([b for _, b, _ in parts]), pos_log_p

    def _sample_shared(self, h: Tensor, p: Tensor, coef: Tensor, num: int) -> tuple[Tensor, Tensor]:
        """Shared draws `[m]` from the summed kernel: one descent with p_bar, summed weights."""
        leaf, log_p = self._descend(p, num)
        uniq, inverse = torch.unique(leaf[0], return_inverse=True)
        rows, ok = self.bucket_rows(uniq)  # [U, b]
        bucket_items = self.items.index_select(0, rows.flatten())
        weights = self.fmap.mixture_kernel(h, coef, bucket_items).view_as(rows)
        slot, log_w = pick_in_bucket(weights[inverse], ok[inverse])
        ids = rows[inverse, slot]
        return ids, log_p[0] + log_w

    def _sample_rows(
        self, h: Tensor, p: Tensor, num: int, score_all: bool, positives: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Per-query draws `[Q, m]`: each row descends with its own p and its own kernel.

        `positives [Q]` ride along the descent as column m (`_descend`); the pick inside the
        buckets scores all n items at once (`score_all`, a catalogue of at most
        _SCORE_ALL_FACTOR m b items) or gathers each draw's bucket.
        """
        forced = None if positives is None else (positives - 1) // self.b
        leaf, log_p = self._descend(p, num, forced)
        pick = pick_scoring_all if score_all else pick_gathered
        ids, log_w, pos_log_w = pick(self, h, leaf, num, positives)
        pos_log_p = None if pos_log_w is None else log_p[:, num] + pos_log_w
        return ids, log_p[:, :num] + log_w, pos_log_p

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
            pair = self._scores(p @ level.T, valid).view(p.shape[0], -1, 2)
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
            s = self._scores(s, self.valid[level][pair])
            log_p += torch.log(s.gather(1, (node & 1).unsqueeze(1))[:, 0]) - torch.log(s.sum(1))
        rows, ok = self.bucket_rows(leaf)  # [B, b]
        if shared:
            weights = self.fmap.mixture_kernel(h, coef, self.items[rows.flatten()]).view_as(rows)
        else:
            weights = self.fmap.kernel(torch.einsum("qbd,qd->qb", self.items[rows], h))
        return log_p + log_share(masked(weights, ok), ids - 1 - leaf * self.b)
