"""A retrain's warm start: the served model's weights and optimiser state on a larger catalogue.

The vocabulary is append-only, so the served model's n_old items keep their rows 1..n_old and
new items take rows n_old + 1..n. Everything else (the query tower, positions, blocks) is
copied as it is. The source is the served version's training checkpoint
(`runs/<version>/checkpoints/best.ckpt`: weights and Adam moments; under `train.ema_decay`
the weights are the served average, the moments the live weights') when the home still has
it, else the bundle itself (the query tower, and the item table from the exported
embeddings; the optimiser then starts fresh).

New items' rows (`retrain.new_item_init`):
- `context`: the mean of the warm query tower's (L2-normalised) query vectors for the
  histories that precede the new item in the training sequences (at most `CONTEXTS_PER_ITEM`
  of them), scaled to the known rows' mean norm. That is the direction the softmax gradient
  pulls the item towards, taken in one step: the item starts where the model's queries for
  it already point. A new item that never follows a history keeps its random row;
- `random`: the fresh model's random rows.

Shrink and perturb (`retrain.shrink` lambda, `retrain.perturb` p; Ash & Adams, "On
Warm-Starting Neural Network Training", NeurIPS 2020): every served weight w becomes
lambda w + p w_0, w_0 the fresh model's initial value of it, before new rows are added. A
warm-started network tends to generalise worse than a fresh one trained on the same data; the
paper closes that gap this way and keeps most of the warm start's speed (on amazon-beauty it
did not: docs/benchmarks/archive/benchmarks.md, "Retraining"). The learned
temperature is kept as it is, and the optimiser starts fresh (its moments describe the
weights before the shrink). lambda = 1, p = 0 (the defaults) is the plain warm start.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import polars as pl
import torch
from pytorch_lightning.callbacks import Callback
from torch import Tensor

from data.errors import RecsysInputError
from model.bundle import ModelBundle
from training.loop.lit_module import RetrievalModule
from training.retrain_config import RetrainConfig

log = logging.getLogger(__name__)

CONTEXTS_PER_ITEM = 64  # histories averaged per new item (its first ones in the sequences)
QUERY_TABLE = "model.query_tower.item_embedding.weight"
ITEM_TABLE = "model.item_tower.embedding.weight"
LEARNED_TEMPERATURE = "log_temperature"  # RetrievalModule's, with model.learn_temperature


@dataclass
class WarmStart:
    """What a retrain starts from (see the module docstring).

    Attributes:
        state: The previous module's state_dict (item tables `[n_old + 1, d]`).
        optimizer_states: The previous optimisers' state_dicts, or None (a fresh optimiser).
        old_items: n_old.
        init: "context" or "random".
        contexts: (histories int64 `[k, L]` left-padded, new item_idx `[k]`): where new items
            occur in the training sequences.
        shrink: lambda of shrink and perturb (1: the weights as served).
        perturb: p of shrink and perturb (0: no fresh initialisation added).

    """

    state: dict[str, Tensor]
    optimizer_states: list[dict[str, Any]] | None
    old_items: int
    init: str
    contexts: tuple[Tensor, Tensor]
    shrink: float = 1.0
    perturb: float = 0.0

    @property
    def shrinks(self) -> bool:
        """Shrink and perturb is on."""
        return self.shrink != 1.0 or self.perturb != 0.0

    def apply(self, module: RetrievalModule) -> list[Callback]:
        """Load the weights into `module` (a model over n >= n_old items); its callbacks.

        Raises:
            RecsysInputError: the module's shapes differ from the served model's (a `--set`
                that changes the model needs `--full`).

        """
        fresh = module.state_dict()
        merged = {
            name: self._row_extended(name, self._shrunk(name, old, fresh.get(name)), fresh)
            for name, old in self.state.items()
        }
        try:
            module.load_state_dict({**fresh, **merged})
        except RuntimeError as err:
            raise RecsysInputError(
                f"cannot warm-start: the model differs from the served one ({err}); "
                "retrain with --full"
            ) from None
        if self.init == "context":
            _context_rows(module, self.old_items, *self.contexts)
        if self.shrinks:
            return []
        return optimizer_state_loader(self.optimizer_states)

    def _shrunk(self, name: str, old: Tensor, init: Tensor | None) -> Tensor:
        """Shrunk and perturbed: lambda old + p init (init's first rows if the table grew)."""
        if not self.shrinks or name == LEARNED_TEMPERATURE:
            return old
        if init is None or not old.is_floating_point():
            return old
        if init.dim() > 0 and init.shape[1:] == old.shape[1:]:
            init = init[: old.shape[0]]
        if init.shape != old.shape:
            return old  # load_state_dict names the mismatch
        return self.shrink * old + self.perturb * init.to(old)

    def _row_extended(self, name: str, old: Tensor, fresh: dict[str, Tensor]) -> Tensor:
        if name not in (QUERY_TABLE, ITEM_TABLE) or name not in fresh:
            return old
        table = fresh[name].clone()
        if table.shape[1:] != old.shape[1:] or table.shape[0] < old.shape[0]:
            return old  # load_state_dict names the mismatch
        table[: old.shape[0]] = old
        return table


@torch.no_grad()
def _context_rows(
    module: RetrievalModule, old_items: int, histories: Tensor, targets: Tensor
) -> None:
    """Set each new item's rows to its mean context query vector (see the module docstring)."""
    if targets.numel() == 0:
        return
    model = module.model
    was_training = model.training
    model.eval()
    queries = torch.cat([model.query_tower.encode(h) for h in histories.split(1024)])
    queries = torch.nn.functional.normalize(queries, dim=1)
    model.train(was_training)
    table = model.item_embedding_weight
    sums = torch.zeros_like(table).index_add_(0, targets, queries)
    counts = torch.bincount(targets, minlength=table.shape[0]).to(table.dtype)
    new = torch.unique(targets)
    # positive part (the item's own contexts) minus negative part (every query's pull away)
    direction = sums[new] / counts[new, None] - queries.mean(dim=0)
    scale = table[1 : old_items + 1].norm(dim=1).mean()
    rows = torch.nn.functional.normalize(direction, dim=1) * scale
    for weight in {id(t): t for t in model.embedding_parameters()}.values():
        weight[new] = rows


def new_item_contexts(train: pl.DataFrame, old_items: int, max_len: int) -> tuple[Tensor, Tensor]:
    """Histories preceding each occurrence of a new item (index > old_items) in `train.items`.

    Returns:
        (int64 `[k, max_len]` histories, left-padded with 0, newest last; int64 `[k]` targets),
        at most CONTEXTS_PER_ITEM per new item, histories of at least one item only.

    """
    histories: list[list[int]] = []
    targets: list[int] = []
    seen: dict[int, int] = {}
    for items in train["items"].to_list():
        for pos in range(1, len(items)):
            item = items[pos]
            if item > old_items and seen.get(item, 0) < CONTEXTS_PER_ITEM:
                seen[item] = seen.get(item, 0) + 1
                window = items[max(0, pos - max_len) : pos]
                histories.append([0] * (max_len - len(window)) + window)
                targets.append(item)
    shape = (len(targets), max_len)
    return (
        torch.tensor(histories, dtype=torch.int64).reshape(shape),
        torch.tensor(targets, dtype=torch.int64),
    )


def optimizer_state_loader(states: list[dict[str, Any]] | None) -> list[Callback]:
    """The callback loading optimiser `states` (a checkpoint's) as training starts.

    None: no callback, the optimisers start fresh.
    """
    return [] if states is None else [_OptimizerState(states)]


class _OptimizerState(Callback):
    """Load the previous optimisers' state once training starts, item-table rows zero-padded."""

    def __init__(self, states: list[dict[str, Any]]) -> None:
        self.states = states

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Pad the moments of the item tables to the new row count and load them."""
        if len(trainer.optimizers) != len(self.states):  # e.g. sparse tables switched on
            log.warning("the optimisers differ from the served run's: they start fresh")
            return
        tables = {id(p) for p in pl_module.model.embedding_parameters()}
        for optimizer, state in zip(trainer.optimizers, self.states, strict=True):
            if not _same_parameters(optimizer, state, tables):  # e.g. a learned temperature
                log.warning(
                    "the %s's parameters differ from the served run's (a --set changed them): "
                    "its moments start fresh", type(optimizer).__name__,
                )  # fmt: skip
                continue
            params = [p for group in optimizer.param_groups for p in group["params"]]
            padded = {
                index: {
                    key: _pad_rows(value, params[index]) if id(params[index]) in tables else value
                    for key, value in moments.items()
                }
                for index, moments in state["state"].items()
            }
            # the moments continue; the lr and weight decay are this run's, not the served run's
            settings = [{k: g[k] for k in _OWN_SETTINGS if k in g} for g in optimizer.param_groups]
            optimizer.load_state_dict({**state, "state": padded})
            for group, own in zip(optimizer.param_groups, settings, strict=True):
                group.update(own)


_OWN_SETTINGS = ("lr", "initial_lr", "weight_decay", "decoupled_weight_decay")  # the retrain's own


def _same_parameters(optimizer: Any, state: dict[str, Any], tables: set[int]) -> bool:
    """The saved optimiser state has this optimiser's groups, parameter counts and shapes.

    `tables`: the ids of the item tables, whose moments may have fewer rows.
    """
    saved = state["param_groups"]
    if len(saved) != len(optimizer.param_groups):
        return False
    for group, old in zip(optimizer.param_groups, saved, strict=True):
        if len(group["params"]) != len(old["params"]):
            return False
        for param, index in zip(group["params"], old["params"], strict=True):
            moments = [v for k, v in state["state"].get(index, {}).items() if k != "step"]
            if not all(_moment_fits(value, param, id(param) in tables) for value in moments):
                return False
    return True


def _moment_fits(value: Any, param: Tensor, table: bool) -> bool:
    """A moment has its parameter's shape; an item table's `[n_old + 1, d]` of `[n + 1, d]`."""
    if not isinstance(value, Tensor) or value.shape == param.shape:
        return True
    same_rows = value.dim() == 2 and value.shape[1:] == param.shape[1:]
    return table and same_rows and value.shape[0] <= param.shape[0]


def _pad_rows(value: Any, param: Tensor) -> Any:
    """A moment tensor `[n_old + 1, d]` zero-padded to the parameter's `[n + 1, d]`."""
    if not isinstance(value, Tensor) or value.dim() != 2 or value.shape == param.shape:
        return value
    padded = torch.zeros_like(param)
    padded[: value.shape[0]] = value.to(param.device)
    return padded


def from_served(
    served: ModelBundle,
    checkpoint: dict[str, Any] | None,
    cfg: RetrainConfig,
    contexts: tuple[Tensor, Tensor],
) -> WarmStart:
    """The warm start of a retrain from the served bundle and, if found, its run's checkpoint."""
    init, shrink = cfg.new_item_init, (cfg.shrink, cfg.perturb)
    if checkpoint is not None:
        return WarmStart(
            checkpoint["state_dict"], checkpoint.get("optimizer_states"), served.manifest.num_items,
            init, contexts, *shrink,
        )  # fmt: skip
    state = {f"model.query_tower.{k}": v for k, v in served.query_tower.state_dict().items()}
    if served.manifest.model.learn_temperature:  # the learned tau goes on
        state[LEARNED_TEMPERATURE] = torch.tensor(math.log(served.manifest.temperature))
    if served.manifest.model.share_embeddings and QUERY_TABLE in state:
        state[ITEM_TABLE] = state[QUERY_TABLE]  # one table for both towers
    else:  # the item tower's raw table is not exported: its normalised rows stand in
        state[ITEM_TABLE] = torch.from_numpy(served.item_embeddings.copy())
    return WarmStart(state, None, served.manifest.num_items, init, contexts, *shrink)
