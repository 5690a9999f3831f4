"""The loaders of a training, from one `data.split.Splits` (or one shard of its users).

Training windows (`training.loop.examples`) in batches for each rank, from a loader that a fit
resumed part-way through an epoch continues (`TrainLoader`); evaluation examples batched by
history length.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
import polars as pl
import pytorch_lightning as pl_lightning
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from training import distributed
from training.config import TrainConfig
from training.loop.batching import (
    EqualCount,
    LengthBucketBatches,
    RankSlices,
    ResumableBatches,
    ShuffledBatches,
)
from training.loop.examples import EvalExamples, TrainWindows, flatten, make_windows

log = logging.getLogger(__name__)


class SplitsLike(Protocol):
    """What the DataModule reads from `data.split.Splits` (read-only attributes)."""

    @property
    def train(self) -> pl.DataFrame: ...  # noqa: D102
    @property
    def val(self) -> pl.DataFrame: ...  # noqa: D102
    @property
    def test(self) -> pl.DataFrame: ...  # noqa: D102
    @property
    def num_items(self) -> int: ...  # noqa: D102
    @property
    def parts(self) -> tuple[str, ...]: ...  # noqa: D102
    @property
    def shard(self) -> tuple[int, int]: ...  # noqa: D102
    @property
    def train_counts(self) -> np.ndarray | None: ...  # noqa: D102


def _eval_loader(
    dataset: EvalExamples,
    batch_size: int,
    rows: np.ndarray | None = None,
    ranks: tuple[int, int] = (0, 1),
) -> DataLoader:
    """Batches of examples (all, or `rows`) sorted by history length: each trims its padding.

    In split order a batch is as wide as its longest history (L = 50 on Beauty when this was
    measured, where the mean is 9): sorted, the query tower over the 22k validation users
    took 5 s instead of 43 s.
    `ranks` (rank, world): this rank's share, every world-th example (each example once).
    """
    rows = np.arange(len(dataset)) if rows is None else rows
    rank, world = ranks
    order = rows[np.argsort(dataset.lengths[rows], kind="stable")][rank::world]
    batches = [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    return DataLoader(dataset, sampler=batches, batch_size=None)


def eval_batches(frame: pl.DataFrame, max_len: int, batch_size: int) -> DataLoader:
    """Every example of an eval `frame` (`history`, `target`), batched by history length."""
    return _eval_loader(EvalExamples(frame, max_len), batch_size)


def item_counts(splits: SplitsLike) -> Tensor:
    """float32 `[n + 1]` interaction counts in the train split (index 0 is 0).

    A shard's splits carry every shard's counts: popularity comes from the whole log.
    """
    if splits.train_counts is not None:
        return torch.from_numpy(splits.train_counts.astype(np.float32))
    flat, _ = flatten(splits.train["items"])
    counts = np.bincount(flat, minlength=splits.num_items + 1)[: splits.num_items + 1]
    counts[0] = 0
    return torch.from_numpy(counts.astype(np.float32))


class TrainLoader(DataLoader):
    """The training loader, resumable part-way through an epoch (Lightning's stateful loader).

    A checkpoint keeps `state_dict()`: the epoch under way and the batches given in it. A fit
    resumed from a checkpoint taken inside an epoch loads it before its first pass, which then
    continues that epoch's order after those batches: none trained twice, none left out.
    Batches are counted as they leave the loader (workers fetch ahead of training).
    """

    def __init__(self, dataset: Any, batches: ResumableBatches, num_workers: int = 0) -> None:
        super().__init__(
            dataset, sampler=batches, batch_size=None, num_workers=num_workers,
            persistent_workers=num_workers > 0,
        )  # fmt: skip
        self.batches = batches
        self.given = 0

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]  # noqa: D105
        self.given = self.batches.skip  # a resumed pass's skipped batches count as given
        return self._counted(super().__iter__())

    def _counted(self, batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            self.given += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        """The epoch under way and the batches given in it."""
        return {"epoch": self.batches.current, "batches": self.given}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue the checkpoint's epoch after the batches it had given."""
        self.batches.resume(int(state["epoch"]), int(state["batches"]))


def _user_sample(total: int, size: int | None, seed: int) -> np.ndarray | None:
    """A fixed random `size` of `total` example rows (sorted), or None for all of them."""
    if size is None or size >= total:
        return None
    return np.sort(np.random.default_rng(seed).choice(total, size, replace=False))


class SequenceDataModule(pl_lightning.LightningDataModule):
    """Train windows, val and test examples from one `Splits`."""

    def __init__(
        self,
        splits: SplitsLike,
        max_len: int,
        batch_size: int,
        eval_batch_size: int = 512,
        num_workers: int = 0,
        bucket_by_length: bool = False,
        seed: int = 0,
        val_users: int | None = None,
        targets: str = "all",
        item_mask: float = 0.0,
    ) -> None:
        super().__init__()
        self.bucket_by_length = bucket_by_length
        self.seed = seed
        self.splits = splits
        self.max_len = max_len
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        last = targets == "last"
        windows = make_windows(splits.train["items"], max_len, every_prefix=last)
        self.train_set = TrainWindows(
            windows, trim=bucket_by_length, last_only=last, mask=item_mask
        )
        self.val_set = EvalExamples(splits.val, max_len)
        self.test_set = EvalExamples(splits.test, max_len)
        shards = splits.shard[1]  # a shard samples its part of the validation users
        sample = None if val_users is None else -(-val_users // shards)
        self.val_rows = _user_sample(len(self.val_set), sample, seed)

    @classmethod
    def of(
        cls, splits: SplitsLike, train: TrainConfig, max_len: int, val_users: int | None = None
    ) -> SequenceDataModule:
        """The data module a run's `train` settings and history length `max_len` describe.

        `val_users`: the rounds' sample of validation users (a fit: `train.val_users`).
        """
        return cls(
            splits, max_len, train.batch_size, train.eval_batch_size, train.num_workers,
            train.bucket_by_length, train.seed, val_users, train.targets, train.item_mask,
        )  # fmt: skip

    @property
    def num_items(self) -> int:
        """Catalogue size n."""
        return int(self.splits.num_items)

    def _ranks(self) -> tuple[int, int]:
        """(rank, world size) of the Trainer this module serves; (0, 1) without one."""
        trainer = self.trainer
        return (0, 1) if trainer is None else (trainer.global_rank, trainer.world_size)

    def train_dataloader(self) -> TrainLoader:
        """Shuffled training windows: (inputs `[B, L']`, targets `[B, L']`), L' <= L.

        One dataset call per batch (batch_size=None + a batch sampler): no per-row collation.
        With several ranks each takes its part of every batch (`RankSlices`), or, when each
        holds its own shard of the users, B / ranks of its own windows per step.
        """
        rank, world = self._ranks()
        if world == 1:
            batches = self._batches(self.seed, self.batch_size)
        elif self.splits.shard[1] == 1:
            self._check_same_windows()
            global_batches = self._batches(self.seed, self.batch_size)
            batches = RankSlices(global_batches, rank, world)
        else:
            batches = self._own_shard_batches(rank, world)
        return TrainLoader(self.train_set, ResumableBatches(batches), self.num_workers)

    def _batches(self, seed: int, size: int) -> Any:
        """A batch sampler of the windows, ordered by its own seed (not the global RNG).

        So one process and every rank of a data-parallel run see the same batches.
        """
        if self.bucket_by_length:
            return LengthBucketBatches(self.train_set.lengths, size, seed)
        return ShuffledBatches(len(self.train_set), size, seed)

    def _own_shard_batches(self, rank: int, world: int) -> EqualCount:
        """Batches of B / ranks of this rank's own windows, as many as the rank with the most.

        Every check is agreed by all ranks before any raises (a rank that stopped alone would
        leave the others waiting in a collective).

        Raises:
            RuntimeError: on every rank, when the ranks read different event parts, or one holds
                another shard, no training windows or no validation users.

        """
        device = self._device()
        parts = int.from_bytes(hashlib.sha256("\n".join(self.splits.parts).encode()).digest()[:6])
        what = "the event parts read (ingest before starting the ranks)"
        distributed.check_same(parts, what, rel=0.0, device=device)
        validated = len(self.val_set) if self.val_rows is None else len(self.val_rows)
        usable = self.splits.shard == (rank, world) and len(self.train_set) > 0 and validated > 0
        if distributed.smallest(int(usable), device) == 0:
            raise RuntimeError(
                f"a rank cannot train its shard of the users (rank {rank} of {world}: shard "
                f"{self.splits.shard}, {len(self.train_set)} training windows, {validated} "
                f"validation users): too few users for {world} ranks?"
            )
        size = max(self.batch_size // world, 1)
        batches = self._batches(self.seed + rank, size)
        steps = distributed.largest(len(batches), device)
        log.info(
            "rank %d of %d holds users %d::%d: %d training windows, %d batches of up to %d, "
            "%d steps an epoch", rank, world, rank, world, len(self.train_set), len(batches),
            size, steps,
        )  # fmt: skip
        return EqualCount(batches, steps)

    def _device(self) -> torch.device:
        """The device of the rank's collectives (nccl needs CUDA tensors)."""
        return self.trainer.strategy.root_device  # type: ignore[union-attr]

    def _check_same_windows(self) -> None:
        device = self._device()
        what = "the number of training windows (ingest before starting the ranks)"
        distributed.check_same(len(self.train_set), what, device=device)

    def _eval_ranks(self) -> tuple[int, int]:
        """(rank, ranks) sharing the eval examples; a shard's examples are its rank's alone."""
        return (0, 1) if self.splits.shard[1] > 1 else self._ranks()

    def val_dataloader(self) -> DataLoader:
        """The validation rounds during training: the fixed `val_users` sample (or all)."""
        return _eval_loader(self.val_set, self.eval_batch_size, self.val_rows, self._eval_ranks())

    def test_dataloader(self) -> DataLoader:
        """Test examples, batched by history length (`row` gives the split order)."""
        return _eval_loader(self.test_set, self.eval_batch_size, ranks=self._eval_ranks())

    def eval_dataloader(self, split: str) -> DataLoader:
        """Every example of `split` ("val" or "test"): the final metrics."""
        return _eval_loader(self.val_set if split == "val" else self.test_set, self.eval_batch_size)
