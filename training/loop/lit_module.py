"""The LightningModule: one `_step` for sampled or full softmax, and the sampler's sync.

Model, sampler and loss come from outside (`training.loop.module_build`). Optimisation is
manual because sparse item tables need a second optimiser (`SparseAdam`) beside the dense one,
and because the sampler must hear about the rows that changed right after each step. The
full-ranking evaluation it inherits lives in `training.loop.ranking_eval`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor
from torch.profiler import record_function

from model.towers import TwoTowerModel
from training import distributed
from training.annealing import annealed_temperature
from training.config import RecsysConfig
from training.corrections import query_windows
from training.gathered_scores import gathered_scores
from training.loop.clock import TrainingClock
from training.loop.optim import make_optimizers, schedule_lr
from training.loop.ranking_eval import FullRankingEvaluation
from training.loop.validation_round import ValidationRound
from training.losses import SampledLoss
from training.precision import matmul_precision, precision_line, undo_autocast
from training.sampler_settings import SampledSettings, TracksTheTable
from training.samplers import Negatives, NegativeSampler
from training.samplers.base import SharesBySequence

log = logging.getLogger("recsys.train")

# (queries [N, d], items [n + 1, d], positives [N], tau, user_items [N, W] | None) -> loss
FullLoss = Callable[[Tensor, Tensor, Tensor, Any, Tensor | None], Tensor]
# Profiler labels of a training step's phases (`recsys bench profile` adds them up).
PHASES = {
    name: f"recsys.{name}"
    for name in ("tower", "sampler", "loss", "backward", "optimizer", "sampler_update")
}


def _as_list(opts: Any) -> list[Any]:
    """One optimiser or several -> a list of them."""
    return list(opts) if isinstance(opts, list | tuple) else [opts]


class RetrievalModule(FullRankingEvaluation):
    """Trains a `TwoTowerModel` with sampled softmax (a sampler) or full softmax (None)."""

    def __init__(
        self,
        model: TwoTowerModel,
        cfg: RecsysConfig,
        sampler: NegativeSampler | None,
        sampled_loss: SampledLoss | None = None,
        full_loss: FullLoss | None = None,
    ) -> None:
        super().__init__()
        if sampler is not None and sampled_loss is None:
            raise ValueError("a sampler needs a sampled loss")
        if sampler is None and full_loss is None:
            raise ValueError("full softmax needs full_loss")
        self.model = model
        self.cfg = cfg
        self.sampler = sampler
        self.sampled_loss = sampled_loss
        self.full_loss = full_loss
        self.temperature = cfg.model.temperature
        # model.learn_temperature: tau = exp(log_temperature), trained with the dense parameters
        self.log_temperature = (
            torch.nn.Parameter(torch.tensor(math.log(cfg.model.temperature)))
            if cfg.model.learn_temperature
            else None
        )
        self.automatic_optimization = False
        self.clock = TrainingClock()  # steps, seconds, plateau: the schedule's place
        # `plateau` with a refit after the fit: the refit's steps hold the whole decay, the
        # budget's own (wsd's tail) included (`trainer.fit` sets it; `plateau.DecayOverTheRefit`)
        self.refit_owns_the_decay = False
        self._total_steps: float | None = None
        self._round: ValidationRound | None = None

    # ---- training -------------------------------------------------------------------------

    def _step(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | None]:
        """Loss of one batch of windows and the item rows it touched.

        Args:
            batch: inputs `[B, L]`, targets `[B, L]` (0 = no target).

        Returns:
            (scalar loss, touched item_idx `[k]` or None for full softmax).

        """
        inputs, targets = batch
        keep, precision = targets != 0, self.cfg.train.precision
        with record_function(PHASES["tower"]), matmul_precision(precision, self.device):
            queries = undo_autocast(self._queries(inputs, keep))  # [N, d]
        positives = targets[keep]  # [N]
        user_items = query_windows(inputs, targets) if self.cfg.loss.mask_user_items else None
        tau = self.tau
        weight = distributed.share_weight(positives.shape[0], self.device)
        if self.sampler is None:
            with record_function(PHASES["loss"]), matmul_precision(precision, self.device):
                items = self.model.item_tower.all_embeddings()  # [n + 1, d]
                loss = self.full_loss(queries, items, positives, tau, user_items)  # type: ignore[misc]
                return weight * loss, None
        with record_function(PHASES["sampler"]):
            neg = self._draw(queries.detach(), positives, keep)
        with record_function(PHASES["loss"]), matmul_precision(precision, self.device):
            ids = neg.ids.to(queries.device)
            pos_scores = (queries * self.model.item_tower(positives)).sum(-1)  # [N]
            if ids.dim() == 1:  # shared by the batch
                neg_scores = undo_autocast(queries @ self.model.item_tower(ids).T)  # [N, m]
            else:  # per query [N, m]: scored at the rows of the distinct ids
                rows, inverse = self.model.item_tower.distinct(ids)
                neg_scores = undo_autocast(gathered_scores(queries, rows, inverse))
            loss = weight * self.sampled_loss(  # type: ignore[misc]
                pos_scores, neg_scores, neg, positives, tau, user_items
            )
        touched = torch.cat([positives, ids.reshape(-1), inputs[inputs != 0]]).unique()
        return loss, touched

    def _queries(self, inputs: Tensor, keep: Tensor) -> Tensor:
        """The query tower's outputs at the kept positions `keep [B, L]`: `[N, d]`.

        When every target of the batch is at its window's last position (`train.targets=last`
        makes such batches), the tower encodes that position alone (`encode`), without the
        rest of its last block.
        """
        if not keep[:, :-1].any():
            return self.model.query_tower.encode(inputs)[keep[:, -1]]
        return self.model.query_tower(inputs)[keep]

    def _draw(self, queries: Tensor, positives: Tensor, keep: Tensor) -> Negatives:
        """The sampler's negatives for the kept positions `keep [B, L]` of a batch.

        A sampler that shares draws by history (`per_sequence`) also hears each query's row.
        """
        settings = self.cfg.sampler
        assert isinstance(settings, SampledSettings) and self.sampler is not None
        num = settings.num_negatives
        if not getattr(settings, "per_sequence", False):
            return self.sampler.sample(queries, positives, num)
        rows = torch.arange(keep.shape[0], device=keep.device).unsqueeze(1).expand_as(keep)
        sharing = cast(SharesBySequence, self.sampler)  # its settings say so
        return sharing.sample(queries, positives, num, groups=rows[keep])

    @property
    def tau(self) -> Any:
        """The temperature of a step: the learned one (a tensor with a gradient) or the config's."""
        return self.temperature if self.log_temperature is None else self.log_temperature.exp()

    def current_temperature(self) -> float:
        """The temperature as a number (evaluation, the bundle's manifest)."""
        if self.log_temperature is None:
            return float(self.temperature)
        return float(self.log_temperature.detach().exp())

    def _optimizers(self) -> list[Any]:
        return _as_list(self.optimizers())

    def standalone_optimizers(self) -> list[Any]:
        """Fresh optimisers for `optimisation_step` outside a Trainer (benchmarks, tests)."""
        return _as_list(self.configure_optimizers())

    def optimisation_step(
        self,
        batch: tuple[Tensor, Tensor],
        optimizers: list[Any],
        backward: Callable[[Tensor], None],
    ) -> Tensor:
        """One whole training step: loss, backward, every optimiser, then the sampler update.

        `backward` is Lightning's `manual_backward` in training; `recsys bench train-step`
        drives the same step outside a Trainer with `Tensor.backward`.
        """
        for opt in optimizers:
            opt.zero_grad()
        loss, touched = self._step(batch)
        with record_function(PHASES["backward"]):
            backward(loss)
        with record_function(PHASES["optimizer"]):
            for opt in optimizers:
                opt.step()
        with record_function(PHASES["sampler_update"]):
            self._sync_sampler(touched)
        return loss.detach()

    def _progress(self) -> float:
        """Fraction of training done: steps of the planned total, or of `train.max_minutes`.

        The planned total is the Trainer's (`max_epochs` epochs of batches); early stopping
        may end training before the fraction reaches 1.
        """
        if self._total_steps is None:
            self._total_steps = float(self.trainer.estimated_stepping_batches)
        done = self.clock.progress(self._total_steps, self.cfg.train.max_minutes)
        return min(1.0, distributed.from_rank_zero(done, self.device))  # the ranks' clocks differ

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        """Progress to the sampler and the lr schedule, one optimiser step (manual), update."""
        progress = self._progress()
        if self.sampler is not None:
            self.sampler.set_progress(progress)
        model = self.cfg.model
        if model.temperature_final is not None:  # tau along the budget (refused with learn)
            self.temperature = annealed_temperature(
                model.temperature, model.temperature_final, "exponential", progress
            )
        optimizers = self._optimizers()
        budget = 0.0 if self.refit_owns_the_decay else progress  # the lr's share of the budget
        lr = schedule_lr(optimizers, self.cfg.train, self.clock.steps, budget, self.clock.plateau)
        loss = self.optimisation_step(batch, optimizers, self.manual_backward)
        loss = distributed.average(loss)  # each rank's weighted mean: the whole batch's mean
        self.log("train/loss", loss, prog_bar=True, batch_size=batch[0].shape[0])
        if lr is not None:
            self.log("train/lr", lr, batch_size=1)
        if self.log_temperature is not None or self.cfg.model.temperature_final is not None:
            self.log("train/temperature", self.current_temperature(), batch_size=1)
        return loss

    @torch.no_grad()
    def _sync_sampler(self, touched: Tensor | None) -> None:
        """Keep stateful samplers in step with the item table after an optimiser step.

        Sparse optimisers change only the touched rows, so updates suffice, unless the sampler
        refits what updates keep (`refits_sparse`). Dense Adam moves every row a little
        (momentum), so a periodic full refresh bounds the drift.
        """
        self.clock.steps += 1
        if self.sampler is None or touched is None:
            return
        cfg, steps = self.cfg.sampler, self.clock.steps  # stateless samplers never rebuild
        sparse = self.cfg.train.sparse_embeddings
        if (
            isinstance(cfg, TracksTheTable)
            and steps % cfg.refresh_every == 0
            and (cfg.refits_sparse or not sparse)
        ):
            self.sampler.refresh(self.model.item_tower.all_embeddings())
        else:  # every rank applies every rank's rows: the samplers' trees stay identical
            touched = distributed.gather_union(touched)
            self.sampler.update(touched, self.model.item_tower(touched))

    def on_train_start(self) -> None:
        """Build the sampler's state from the initial table; start the progress clock.

        With several ranks, give each its own random stream (dropout, negatives) from here on;
        the weights are identical already (the data module checks the ranks read the same data).
        Rank 0 logs the device and the precision of the matmuls.
        """
        self.clock.start()
        rank, world = distributed.rank_and_world()
        if rank == 0:
            log.info(precision_line(self.cfg.train.precision, self.device))
        if world > 1:
            torch.manual_seed(self.cfg.train.seed + rank)
        if self.sampler is not None:
            with torch.no_grad():
                self.sampler.refresh(self.model.item_tower.all_embeddings())

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keep the schedule's place (`TrainingClock`) and the temperature in the checkpoint."""
        checkpoint["clock"] = self.clock.state_dict()
        checkpoint["temperature"] = self.current_temperature()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A resumed fit continues the schedule where the checkpoint left it."""
        self.clock.load_state_dict(checkpoint.get("clock", {}))
        self.restore_temperature(checkpoint)

    def restore_temperature(self, checkpoint: dict[str, Any]) -> None:
        """A scheduled temperature (`model.temperature_final`) as the checkpoint's step had it.

        A fixed one is the config's; a learned one is a parameter, in the state dict.
        """
        if self.cfg.model.temperature_final is not None and "temperature" in checkpoint:
            self.temperature = float(checkpoint["temperature"])

    def configure_optimizers(self) -> Any:
        """Adam on everything, or Adam on dense parameters + SparseAdam on the id tables."""
        extra = [] if self.log_temperature is None else [self.log_temperature]
        optimizers = make_optimizers(self.model, extra, self.cfg.train)
        return optimizers[0] if len(optimizers) == 1 else optimizers
