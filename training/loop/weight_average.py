"""An exponential moving average of the weights (`train.ema_decay`): the model validation ranks.

After every training batch (one optimiser step) a shadow copy of each parameter moves toward
the live one:

    shadow <- shadow + (1 - d_t) (live - shadow),  d_t = min(decay, (1 + t) / (10 + t))

at step t (counted from 1), the warm-up of TensorFlow's `ExponentialMovingAverage(num_updates)`:
early on the average spans about the last t / 9 steps instead of holding the initial weights
(the cap `decay` binds from t = (10 decay - 1) / (1 - decay), about 9,000 steps at 0.999).
Training moves the live weights; each validation round, the checkpoints, and the model that
leaves the fit are the average:

- a validation round swaps the shadow in at its start and the live weights back at its end
  (this callback's hooks run before the module's, so the round's item table and temperature
  are the average's: `training.loop.validation_round`);
- every checkpoint's `state_dict` is the average (what `best.ckpt` restores, a bundle exports
  and a warm start continues from, with the live weights' Adam moments) and `live_state_dict`
  the weights training goes on from, so a resumed fit continues both; a checkpoint written
  without the average resumes with the average at its weights;
- when training ends the live weights become the average (a checkpoint saved after that, as
  the refit's is, holds the average without live weights);
- a refit goes on averaging from the best round's average, live weights and step count
  (`continue_from`), and ships the average (`training.workflows.refit`).

Lightning's own `EMAWeightAveraging` keeps a deep copy of the whole module instead, which here
would copy the sampler's state (a kernel tree, a proposal table) along with the weights.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback
from torch import Tensor

LIVE_KEY = "live_state_dict"


class WeightAverage(Callback):
    """Keeps the exponential moving average of a module's parameters (see the module doc)."""

    def __init__(self, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"the average's decay must lie in (0, 1), not {decay}")
        self.decay = decay
        self.steps = 0
        self.shadow: dict[str, Tensor] | None = None  # parameter name -> its average

    def decay_at(self, step: int) -> float:
        """d_t of step t (from 1): the warm-up's (1 + t) / (10 + t), capped at `decay`."""
        return min(self.decay, (1.0 + step) / (10.0 + step))

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Start the average at the fit's first weights, or move a resumed one to their device.

        Lightning restores a checkpoint before it moves the module to its device.
        """
        if self.shadow is None:
            self.shadow = _copy_of(pl_module)
        else:
            params = dict(pl_module.named_parameters())
            self.shadow = {name: t.to(params[name].device) for name, t in self.shadow.items()}

    @torch.no_grad()
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
        batch_idx: int,
    ) -> None:  # fmt: skip
        """Move the average one step toward the live weights."""
        assert self.shadow is not None  # on_train_start made it
        self.steps += 1
        names, live = zip(*[(n, p.detach()) for n, p in pl_module.named_parameters()], strict=True)
        averages = [self.shadow[name] for name in names]
        torch._foreach_lerp_(averages, list(live), 1.0 - self.decay_at(self.steps))

    @torch.no_grad()
    def _swap(self, module: pl.LightningModule) -> None:
        assert self.shadow is not None
        for name, param in module.named_parameters():
            kept = param.detach().clone()
            param.copy_(self.shadow[name])
            self.shadow[name] = kept

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The round ranks with the average (the shadow now holds the live weights)."""
        if self.shadow is not None:
            self._swap(pl_module)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Training goes on from the live weights."""
        if self.shadow is not None:
            self._swap(pl_module)

    @torch.no_grad()
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The fit's model is the average; a checkpoint saved after it holds the average alone."""
        if self.shadow is not None:
            for name, param in pl_module.named_parameters():
                param.copy_(self.shadow[name])
            self.shadow = None  # the live weights are gone: nothing to keep beside the average

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """`state_dict` becomes the average; the live weights go to `live_state_dict`."""
        if self.shadow is None:
            return
        # by identity: the module's state_dict names a shared table twice
        average = {id(p): self.shadow[name] for name, p in pl_module.named_parameters()}
        state = pl_module.state_dict(keep_vars=True)
        averaged = {name: average.get(id(t), t).detach().clone() for name, t in state.items()}
        checkpoint[LIVE_KEY], checkpoint["state_dict"] = checkpoint["state_dict"], averaged

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """Resume both: the module holds the checkpoint's average here; the live weights go back."""
        self.shadow = _copy_of(pl_module)
        if LIVE_KEY in checkpoint:
            pl_module.load_state_dict(checkpoint[LIVE_KEY])

    def continue_from(self, module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Go on from `checkpoint` outside a resumed fit (the refit), as a resumed fit does."""
        module.load_state_dict(checkpoint["state_dict"])  # the average, as Lightning loads it
        self.on_load_checkpoint(None, module, checkpoint)  # type: ignore[arg-type]
        state = checkpoint.get("callbacks", {}).get(self.state_key)
        if state is not None:
            self.load_state_dict(state)

    def state_dict(self) -> dict[str, Any]:
        """The step count, for the warm-up of a resumed fit."""
        return {"steps": self.steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume the step count."""
        self.steps = int(state_dict["steps"])


def _copy_of(module: pl.LightningModule) -> dict[str, Tensor]:
    """Parameter name -> a detached copy of its current value."""
    return {name: p.detach().clone() for name, p in module.named_parameters()}
