"""Shared machinery of the kernel-tree samplers (`quadratic`, `rff`): settings, tree sync, draws."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from pydantic import Field
from torch import Tensor

from training.feature_maps import FeatureMap
from training.kernel_tree import KernelTree
from training.sampler_settings import PerSequenceDraws, TracksTheTable
from training.samplers.base import Negatives, SamplerContext, require_whole_table

_PROPOSAL_CHUNK = 1 << 24  # floats of one [queries, n] block in proposal_log_probs


class KernelTreeSettings(TracksTheTable, PerSequenceDraws):
    """Settings every kernel-tree sampler shares; per query by default (as in the papers).

    Its kernel follows the softmax on unit vectors: `--sampler NAME` brings the cosine logits
    (`model.normalize`) at the temperature the sampler comparison ran them at.
    """

    leaf_size: int = Field(32, ge=1, description="Kernel tree leaf bucket size b.")
    score_floor: float = Field(1e-6, gt=0.0, description="Kernel tree node score floor.")
    unit_kernel: ClassVar[bool] = True
    pairs_with: ClassVar[dict[str, dict[str, Any]]] = {
        "model": {"normalize": True, "temperature": 0.1}
    }


def leaf_size(configured: int, features: int, dim: int) -> int:
    """The tree's bucket size b: at least ceil(F / d), so node sums stay O(n d) floats."""
    return max(configured, math.ceil(features / dim))


class KernelTreeSampler:
    """Draws negatives from a kernel distribution through a `KernelTree` kept in sync.

    The feature map is built at the first `refresh`, when the embedding size d is known. The
    leaf bucket size is max(cfg.leaf_size, ceil(F / d)) as Blanc & Rendle suggest, which keeps
    the node sums at O(n d) floats however large F is.
    """

    def __init__(
        self,
        cfg: KernelTreeSettings,
        ctx: SamplerContext,
        make_map: Callable[[int], FeatureMap],
    ) -> None:
        """Remember the config; nothing is built until `refresh`."""
        self.cfg = cfg
        self.num_items = ctx.num_items
        self.temperature = ctx.temperature
        self.per_query = cfg.per_query
        self.per_sequence = cfg.per_sequence
        self._make_map = make_map
        self.tree: KernelTree | None = None

    def _built(self) -> KernelTree:
        if self.tree is None:
            raise RuntimeError("kernel sampler used before refresh(item_emb)")
        return self.tree

    @torch.no_grad()
    def refresh(self, item_emb: Tensor) -> None:
        """Rebuild the tree from `item_emb [n + 1, d]` (row 0 is padding)."""
        require_whole_table(item_emb, self.num_items)
        if self.tree is None:
            dim = int(item_emb.shape[1])
            fmap = self._make_map(dim)
            b = leaf_size(self.cfg.leaf_size, fmap.dim, dim)
            self.tree = KernelTree(fmap, b, self.cfg.score_floor)
        to = getattr(self.tree.fmap, "to", None)
        if to is not None:
            to(item_emb.device)
        self.tree.rebuild(item_emb)

    @torch.no_grad()
    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Rows `item_idx [k]` now hold `item_emb [k, d]`: O(k F log n), or O(n F) from n / 2."""
        self._built().update(item_idx, item_emb)

    @torch.no_grad()
    def sample(
        self, queries: Tensor, positives: Tensor, num: int, groups: Tensor | None = None
    ) -> Negatives:
        """Shared `[m]` draws from the batch's summed kernel, or `[N, m]` per query (per_query).

        With per_sequence and `groups [N]` (each query's history), `[N, m]` with the m draws of
        each history's summed kernel in every row of its positions. log_q = log(m q_i) with
        q_i the probability under the tree as it is now; pos_log_q the same for each positive
        under its own proposal (per query or history, one more path in the draws' descent).
        """
        tree = self._built()
        if self.per_sequence and groups is not None:
            ids, log_p, pos = tree.sample_grouped(queries, groups, num, positives)
            pos_log_p: Tensor | None = pos
        else:
            ids, log_p, pos_log_p = tree.sample(queries, num, not self.per_query, positives)
        assert pos_log_p is not None  # positives were given
        dev = queries.device
        return Negatives(
            ids=ids.to(dev),
            log_q=(log_p + math.log(num)).to(dev),
            pos_log_q=(pos_log_p + math.log(num)).to(dev),
        )

    def set_progress(self, fraction: float) -> None:
        """No-op: the kernel has no schedule."""

    @torch.no_grad()
    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """Brute force O(n F): log q of one draw for each query, `[N, n + 1]`, column 0 -inf.

        Per query (cfg.per_query) each row is that query's own tree distribution; shared, every
        row is the batch's summed-kernel distribution the shared draws come from.
        """
        tree = self._built()
        if not self.per_query:
            return tree.log_prob_all(queries, shared=True).expand(queries.shape[0], -1)
        step = max(1, _PROPOSAL_CHUNK // max(1, tree.num_items))
        parts = [tree.log_prob_all(queries[i : i + step]) for i in range(0, len(queries), step)]
        return torch.cat(parts)
