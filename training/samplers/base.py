"""The negative-sampler contract shared by every sampler, and the sampler registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from torch import Tensor

from training.config import SamplerConfig


@dataclass
class Negatives:
    """Negatives drawn for a batch of queries.

    Attributes:
        ids: int64 item_idx, `[m]` shared by the whole batch or `[N, m]` per query.
            Never 0 (padding). May contain a query's own positive: the loss masks it.
        log_q: float32, same shape as `ids`: log of the expected number of times the id
            appears in this draw under the procedure actually run (`log(m * q_i)` for m draws
            with replacement, `log(b_i)` for Bernoulli inclusion probabilities).

    """

    ids: Tensor
    log_q: Tensor


@dataclass
class SamplerContext:
    """What a sampler may know about the catalogue when it is built.

    Attributes:
        num_items: Catalogue size n; valid item_idx are 1..n (0 is padding).
        item_counts: float32 `[n + 1]`, training-split interaction counts (index 0 is 0).
        temperature: The model's softmax temperature tau (logit = h . c / tau), for samplers
            that approximate the model's softmax.

    """

    num_items: int
    item_counts: Tensor
    temperature: float = 1.0


@runtime_checkable
class NegativeSampler(Protocol):
    """Draws negatives for a batch of queries; stateful samplers track item embeddings."""

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Draw negatives.

        Args:
            queries: `[N, d]` L2-normalised query embeddings (detached).
            positives: `[N]` int64 item_idx of each query's positive.
            num: Number of negatives m (shared: `[m]`; per query: `[N, m]`).

        """
        ...

    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Tell the sampler that rows `item_idx [k]` now have embeddings `item_emb [k, d]`."""
        ...

    def refresh(self, item_emb: Tensor) -> None:
        """Full rebuild from the whole table `item_emb [n + 1, d]` (row 0 is padding)."""
        ...


SamplerFactory = Callable[[SamplerConfig, SamplerContext], NegativeSampler]
SAMPLERS: dict[str, SamplerFactory] = {}


def register_sampler(name: str) -> Callable[[SamplerFactory], SamplerFactory]:
    """Class or function decorator adding a sampler factory to `SAMPLERS` under `name`."""

    def add(factory: SamplerFactory) -> SamplerFactory:
        if name in SAMPLERS:
            raise ValueError(f"sampler {name!r} registered twice")
        SAMPLERS[name] = factory
        return factory

    return add
