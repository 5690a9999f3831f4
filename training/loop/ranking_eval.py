"""Full-ranking evaluation of a training module: each val/test round ranks every item.

`FullRankingEvaluation` is the part of the LightningModule that validation and test use: at a
round's start the item table is computed once (`ValidationRound`), each batch of targets is
ranked against every item (`rank_batch`), and at the end the round's metrics are logged as
`val/...` or `test/...` (with the sampler's proposal KL on validation).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import Tensor

from model.towers import TwoTowerModel
from training.config import RecsysConfig
from training.evaluation.ranking import rank_batch
from training.loop.validation_round import ValidationRound
from training.samplers import NegativeSampler


class FullRankingEvaluation(pl.LightningModule):
    """Validation and test hooks over a two-tower model; the trainer's module adds training."""

    model: TwoTowerModel
    cfg: RecsysConfig
    sampler: NegativeSampler | None
    _round: ValidationRound | None

    def current_temperature(self) -> float:
        """The temperature the model ranks with (the training module's)."""
        raise NotImplementedError

    def _eval_start(self) -> None:
        with torch.no_grad():
            item_emb = self.model.item_tower.all_embeddings()
        keep, tau = self.cfg.train.eval_batch_size, self.current_temperature()
        self._round = ValidationRound(item_emb, keep, tau)

    def _eval_step(self, batch: dict[str, Tensor]) -> None:
        ev, round_ = self.cfg.eval, self._round
        assert round_ is not None  # Lightning starts every round before its steps
        ranks, log_p, queries = rank_batch(
            self.model.query_tower,
            round_.item_emb,
            batch,
            round_.temperature,
            ev.exclude_seen,
            ev.item_chunk,
            self.cfg.ranks_by_magnitude,
        )
        round_.add(ranks, log_p, queries, batch["row"])

    def _eval_end(self, prefix: str) -> None:
        round_, self._round = self._round, None
        if round_ is None:
            return
        metrics = round_.metrics(self.cfg.eval.ks, self.device)
        for name, value in metrics.items():
            self.log(f"{prefix}/{name}", value, prog_bar=name == "ndcg@10")
        if metrics and prefix == "val" and self.sampler is not None:
            kl = round_.proposal_kl(self.sampler, self.cfg.ranks_by_magnitude, self.device)
            self.log("val/proposal_kl", kl)

    def on_validation_epoch_start(self) -> None:
        """Normalise the item table once per validation round."""
        self._eval_start()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Rank one batch of validation targets against all items."""
        self._eval_step(batch)

    def on_validation_epoch_end(self) -> None:
        """Log `val/recall@K`, `val/ndcg@K`, `val/mrr@K`, `val/full_ce`, `val/proposal_kl`."""
        self._eval_end("val")

    def on_test_epoch_start(self) -> None:
        """Normalise the item table once for the test round."""
        self._eval_start()

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Rank one batch of test targets against all items."""
        self._eval_step(batch)

    def on_test_epoch_end(self) -> None:
        """Log the `test/...` metrics."""
        self._eval_end("test")
