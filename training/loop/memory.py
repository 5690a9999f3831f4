"""The memory a training needs, printed at its start: what to size a machine (or a rank) for.

Item table and optimiser state are exact (the parameters' bytes, Adam's two moments each; the
moving average of `train.ema_decay` one more copy of them);
the sampler's state is the bytes of the tensors it holds (a kernel tree's node sums, a copy of
the item table, a proposal table); the per-rank batch is its logits and their gradient, the
largest activation of a step at large catalogues (`[N, n]` for the full softmax, one tensor
on the CPU, bf16 there under bf16: `full_softmax.logit_bytes`; or `[N, loss.full_chunk]` above
that many items; `[N, m]` sampled; N = the rank's share of batch_size x max_len targets at
most, of batch_size with `train.targets=last`).
"""

from __future__ import annotations

import logging
from typing import Any

import pytorch_lightning as pl_lightning
import torch

from training.config import RecsysConfig
from training.full_softmax import logit_bytes
from training.sampler_settings import SampledSettings

log = logging.getLogger(__name__)
MIB = 2**20
_MAX_DEPTH = 3  # a sampler's tensors sit at most this deep in its attributes


def tensor_bytes(obj: Any, depth: int = 0) -> int:
    """Bytes of the distinct tensors reachable from `obj` through attributes, lists and dicts."""
    seen: set[int] = set()

    def walk(value: Any, level: int) -> int:
        if isinstance(value, torch.Tensor):
            key = value.untyped_storage().data_ptr()
            if key in seen:
                return 0
            seen.add(key)
            return value.untyped_storage().nbytes()
        if level >= _MAX_DEPTH:
            return 0
        if isinstance(value, dict):
            return sum(walk(v, level + 1) for v in value.values())
        if isinstance(value, list | tuple):
            return sum(walk(v, level + 1) for v in value)
        if hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module | type):
            return sum(walk(v, level + 1) for v in vars(value).values())
        return 0

    return walk(obj, depth)


def budget(module: Any, cfg: RecsysConfig, world: int) -> dict[str, float]:
    """MiB of each part: item table, optimiser state, sampler state, one rank's batch logits.

    With `train.ema_decay`, also the moving average's copy of every parameter.
    """
    trained = [p for p in module.parameters() if p.requires_grad]
    table = module.model.item_embedding_weight  # its size only: no normalised copy
    per_window = cfg.model.max_len if cfg.train.targets == "all" else 1
    targets = -(-cfg.train.batch_size // world) * per_window
    sampler = cfg.sampler
    if isinstance(sampler, SampledSettings):
        logits = 2 * targets * sampler.num_negatives * 4  # fp32 logits and gradient
    else:  # the full softmax: one piece, or one chunk above loss.full_chunk items
        rows, chunk = table.shape[0], cfg.loss.full_chunk
        logits = logit_bytes(targets, rows, chunk, module.device, cfg.train.precision)
    parts = {
        "item table": table.numel() * table.element_size() / MIB,
        "optimiser state": 2 * _bytes(trained) / MIB,
        "sampler state": tensor_bytes(module.sampler) / MIB if module.sampler else 0.0,
        "batch logits per rank": logits / MIB,
    }
    if cfg.train.ema_decay is not None:  # a copy of every parameter, frozen ones too
        parts["weight average"] = _bytes(module.parameters()) / MIB
    return parts


def _bytes(params: Any) -> int:
    return sum(p.numel() * p.element_size() for p in params)


def describe(parts: dict[str, float], world: int) -> str:
    """`memory per rank (2 ranks): item table 12.0 MiB, ...`."""
    listed = ", ".join(f"{name} {mib:,.1f} MiB" for name, mib in parts.items())
    return f"memory per rank ({world} rank{'s' if world > 1 else ''}): {listed}"


class MemoryBudget(pl_lightning.Callback):
    """Logs the budget once, on rank 0, at the first step (the sampler's state is built then)."""

    def __init__(self) -> None:
        self._done = False

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:  # noqa: D102
        if self._done or not trainer.is_global_zero:
            return
        self._done = True
        world = trainer.world_size
        log.info(describe(budget(pl_module, pl_module.cfg, world), world))
