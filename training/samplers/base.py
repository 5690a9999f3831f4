"""The negative-sampler contract shared by every sampler, and the sampler registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from torch import Tensor

from training.sampler_settings import SampledSettings, register_settings


@dataclass
class Negatives:
    """Negatives drawn for a batch of queries.

    Attributes:
        ids: int64 item_idx, `[m]` shared by the whole batch or `[N, m]` per query.
            Never 0 (padding). May contain a query's own positive: the loss masks it.
            A shared draw's width m may vary from draw to draw (`bernoulli`, `tapas`).
        log_q: float32, same shape as `ids`: what the loss's log-q step subtracts. For a
            random draw it is the log of the expected number of times the id appears in the
            draw under the procedure actually run (`log(m q_i)` for m draws with replacement,
            `log(b_i)` for Bernoulli inclusion). `tapas` keeps a deterministic top m of a
            random presample: with tapas's `correction: presample` this is the presample's
            expected count of each kept id; None (`correction: none`, the paper's
            choice) when no correction is applied: then the loss subtracts nothing.
        pos_log_q: float32 `[N]`: the same quantity for each query's positive, i.e. what the
            sampler's own proposal gives it (`nce` and `blackout` weigh the positive by it);
            None exactly when `log_q` is None.
        presample: The random first pass of a two-pass sampler (`tapas`), whose `log_q` is
            the exact expected count of its ids; None for a one-pass sampler, whose own draw
            this is. The contract suite checks the frequencies of `presample or self`.

    """

    ids: Tensor
    log_q: Tensor | None
    pos_log_q: Tensor | None
    presample: Negatives | None = None

    def __post_init__(self) -> None:
        if (self.log_q is None) != (self.pos_log_q is None):
            raise ValueError("Negatives: log_q and pos_log_q are both given or both None")

    @property
    def draw(self) -> Negatives:
        """The random draw behind these negatives: the presample, or these negatives."""
        return self if self.presample is None else self.presample


@dataclass
class SamplerContext:
    """What a sampler may know about the catalogue when it is built.

    Attributes:
        num_items: Catalogue size n; valid item_idx are 1..n (0 is padding).
        item_counts: float32 `[n + 1]`, training-split interaction counts (index 0 is 0).
        temperature: The model's softmax temperature tau (logit = h . c / tau), for samplers
            that approximate the model's softmax.
        seed: The run's seed (`train.seed`), for what a sampler draws once (rff's frequencies).

    """

    num_items: int
    item_counts: Tensor
    temperature: float = 1.0
    seed: int = 0


@runtime_checkable
class NegativeSampler(Protocol):
    """Draws negatives for a batch of queries; stateful samplers track item embeddings.

    Everything the trainer (`training/loop/lit_module.py`) and the diagnostics call is declared
    here; the contract suite fails a registered sampler that lacks any of it.

    Attributes:
        per_query: True when `sample` returns `[N, m]` (each query its own draw), False for
            one shared `[m]` draw. Samplers that only draw shared negatives (`in-batch`,
            `bernoulli`, `tapas`) set False; their settings have no `per_query` key.

    """

    per_query: bool

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        """Draw negatives.

        Args:
            queries: `[N, d]` L2-normalised query embeddings (detached).
            positives: `[N]` int64 item_idx of each query's positive.
            num: Number of negatives m (shared: `[m]`; per query: `[N, m]`).

        """
        ...

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        """`[N, n + 1]` log-probability of one draw of the (first-pass) proposal per query.

        Column 0 (padding) is -inf. Used by the KL diagnostic (`val/proposal_kl`) and tests.
        """
        ...

    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """Tell the sampler that rows `item_idx [k]` now have embeddings `item_emb [k, d]`."""
        ...

    def refresh(self, item_emb: Tensor) -> None:
        """Full rebuild from the whole table `item_emb [n + 1, d]` (row 0 is padding)."""
        ...

    def set_progress(self, fraction: float) -> None:
        """Training progress in [0, 1], told before each training step (schedules: `tapas`)."""
        ...


class SharesBySequence(Protocol):
    """A sampler whose settings say `per_sequence`: the trainer also passes each query's history.

    `groups [N]` holds each query's history (its row of the batch); the m draws of a history
    are shared by its positions, and `ids`, `log_q` are `[N, m]` with every row of a history
    its history's.
    """

    def sample(
        self, queries: Tensor, positives: Tensor, num: int, groups: Tensor | None = None
    ) -> Negatives:
        """Draw negatives, shared by the queries of one group when `groups` is given."""
        ...


# each factory takes its own settings class: `Any` here, checked by `register_sampler`'s caller
SamplerFactory = Callable[[Any, SamplerContext], NegativeSampler]
SAMPLERS: dict[str, SamplerFactory] = {}
_Factory = TypeVar("_Factory", bound=SamplerFactory)


def register_sampler(settings: type[SampledSettings]) -> Callable[[_Factory], _Factory]:
    """Class or function decorator registering a sampler with its settings class.

    The sampler is registered in `SAMPLERS` and its settings in
    `training.sampler_settings.SETTINGS`, both under the name the settings class answers to
    (its `name` field's default); the factory is called with an instance of `settings`.
    Adding a sampler is this call in its own module, and importing that module.
    """

    def add(factory: _Factory) -> _Factory:
        SAMPLERS[register_settings(settings)] = factory
        return factory

    return add


def require_whole_table(item_emb: Tensor, num_items: int) -> None:
    """Refuse a `refresh` table that is not the whole item table `[n + 1, d]` (row 0 padding)."""
    if item_emb.shape[0] != num_items + 1:
        raise ValueError(f"item_emb has {item_emb.shape[0]} rows, expected n + 1 = {num_items + 1}")


class Stateless:
    """No-op `update`, `refresh` and `set_progress` for samplers that track nothing."""

    def update(self, item_idx: Tensor, item_emb: Tensor) -> None:
        """No-op: the proposal does not depend on embeddings."""

    def refresh(self, item_emb: Tensor) -> None:
        """No-op: the proposal does not depend on embeddings."""

    def set_progress(self, fraction: float) -> None:
        """No-op: the proposal has no schedule."""
