"""Training and evaluation batches from `data.split.Splits`, built with numpy (no per-item loop).

Training: every train sequence is cut, from its end, into windows of L + 1 items that overlap by
one item, so each transition is predicted exactly once; the earliest (short) window is
left-padded with 0. A window gives input `[L]` and targets `[L]` (0 = no target).
Evaluation: history left-padded to `[L]` (most recent last), one target, and the full history
(padded to the batch's longest) for excluding seen items.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import polars as pl
import pytorch_lightning as pl_lightning
import torch
from torch import Tensor
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
)

from training.batching import LengthBucketBatches, RankSlices


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


def _flatten(lists: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A list column -> (flat int64 values, int64 offsets `[U + 1]`)."""
    lengths = lists.list.len().fill_null(0).to_numpy().astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = lists.explode().drop_nulls().to_numpy().astype(np.int64)
    return flat, offsets


def _gather_left_padded(
    flat: np.ndarray, starts: np.ndarray, ends: np.ndarray, width: int
) -> np.ndarray:
    """Rows `flat[max(start, end - width):end]`, left-padded with 0 to `width`: `[R, width]`."""
    cols = ends[:, None] - width + np.arange(width)[None, :]
    valid = cols >= starts[:, None]
    padded = np.concatenate([[0], flat])  # index 0 is the pad value
    return np.where(valid, padded[np.where(valid, cols + 1, 0)], 0)


def make_windows(sequences: pl.Series, max_len: int, every_prefix: bool = False) -> np.ndarray:
    """Cut sequences into training windows.

    Args:
        sequences: list[int64] item_idx per user, oldest first.
        max_len: L.
        every_prefix: One window per transition, ending at its target (`train.targets=last`),
            instead of consecutive windows that cover each transition once.

    Returns:
        int64 `[W, L + 1]`: left-padded windows; input = `[:, :-1]`, targets = `[:, 1:]`.

    """
    flat, offsets = _flatten(sequences)
    lengths = np.diff(offsets)
    transitions = np.maximum(lengths - 1, 0)
    if every_prefix:
        user = np.repeat(np.arange(len(lengths)), transitions)
        first = np.cumsum(transitions) - transitions
        ends = offsets[user] + 2 + np.arange(len(user)) - np.repeat(first, transitions)
        return _gather_left_padded(flat, offsets[user], ends, max_len + 1)
    per_user = -(-transitions // max_len)  # ceil; users with < 2 items give no window
    user = np.repeat(np.arange(len(lengths)), per_user)
    first_window = np.cumsum(per_user) - per_user
    k = np.arange(len(user)) - np.repeat(first_window, per_user)  # 0 = the latest window
    ends = offsets[user + 1] - k * max_len
    return _gather_left_padded(flat, offsets[user], ends, max_len + 1)


def trim_left(*seqs: Tensor) -> tuple[Tensor, ...]:
    """Drop the leading columns that are padding in every row of `seqs[0]` (`[B, L] -> [B, L']`).

    Safe for the towers: positions count from the end of the window, so an encoding does not
    depend on how much padding sits in front of the items.
    """
    real = (seqs[0] != 0).any(dim=0)
    first = int(real.int().argmax()) if bool(real.any()) else seqs[0].shape[1] - 1
    return tuple(s[:, first:] for s in seqs)


class TrainWindows(Dataset[tuple[Tensor, Tensor]]):
    """Training windows; indexing with a list of rows returns a whole batch at once."""

    def __init__(self, windows: np.ndarray, trim: bool = False, last_only: bool = False) -> None:
        self.windows = torch.from_numpy(np.ascontiguousarray(windows, dtype=np.int64))
        self.trim = trim
        self.last_only = last_only  # only the window's last position has a target

    @property
    def lengths(self) -> np.ndarray:
        """Non-padding items of each window's input: `[W]`."""
        return (self.windows[:, :-1] != 0).sum(dim=1).numpy()

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, rows: Any) -> tuple[Tensor, Tensor]:
        """`rows [B]` -> (inputs `[B, L]`, targets `[B, L]`; 0 = no target).

        A target is set exactly where the input is an item (not padding).
        """
        batch = self.windows[torch.as_tensor(rows)]
        inputs = batch[:, :-1]
        # The first item of a sequence has no history to predict it from.
        targets = batch[:, 1:] * (inputs != 0)
        if self.last_only:
            targets[:, :-1] = 0
        if self.trim:
            inputs, targets = trim_left(inputs, targets)
        return inputs, targets


class EvalExamples(Dataset[dict[str, Tensor]]):
    """Leave-one-out style examples: a history and the one target to rank."""

    def __init__(self, frame: pl.DataFrame, max_len: int) -> None:
        self.flat, self.offsets = _flatten(frame["history"])
        self.targets = torch.from_numpy(frame["target"].to_numpy().astype(np.int64))
        self.max_len = max_len

    @property
    def lengths(self) -> np.ndarray:
        """Full history length of each example: `[U]`."""
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, rows: Any) -> dict[str, Tensor]:
        """One batch of examples.

        Returns:
            history `[B, L']` (common padding trimmed), target `[B]`, seen `[B, H]`, and row
            `[B]`: each example's position in the split (to restore the split's order).

        """
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        longest = max(int((ends - starts).max(initial=0)), 1)
        history = torch.from_numpy(_gather_left_padded(self.flat, starts, ends, self.max_len))
        return {
            "history": trim_left(history)[0],
            "target": self.targets[torch.from_numpy(rows)],
            "seen": torch.from_numpy(_gather_left_padded(self.flat, starts, ends, longest)),
            "row": torch.from_numpy(rows),
        }


def _eval_loader(
    dataset: EvalExamples,
    batch_size: int,
    rows: np.ndarray | None = None,
    ranks: tuple[int, int] = (0, 1),
) -> DataLoader:
    """Batches of examples (all, or `rows`) sorted by history length: each trims its padding.

    In split order a batch is as wide as its longest history (L = 50 on Beauty, where the mean
    is 9): sorted, the query tower over the 22k validation users took 5 s instead of 43 s.
    `ranks` (rank, world): this rank's share, every world-th example (each example once).
    """
    rows = np.arange(len(dataset)) if rows is None else rows
    rank, world = ranks
    order = rows[np.argsort(dataset.lengths[rows], kind="stable")][rank::world]
    batches = [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    return DataLoader(dataset, sampler=batches, batch_size=None)


def item_counts(splits: SplitsLike) -> Tensor:
    """float32 `[n + 1]` interaction counts in the train split (index 0 is 0)."""
    flat, _ = _flatten(splits.train["items"])
    counts = np.bincount(flat, minlength=splits.num_items + 1)[: splits.num_items + 1]
    counts[0] = 0
    return torch.from_numpy(counts.astype(np.float32))


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
        self.train_set = TrainWindows(windows, trim=bucket_by_length, last_only=last)
        self.val_set = EvalExamples(splits.val, max_len)
        self.test_set = EvalExamples(splits.test, max_len)
        self.val_rows = _user_sample(len(self.val_set), val_users, seed)

    @property
    def num_items(self) -> int:
        """Catalogue size n."""
        return int(self.splits.num_items)

    def _ranks(self) -> tuple[int, int]:
        """(rank, world size) of the Trainer this module serves; (0, 1) without one."""
        trainer = self.trainer
        return (0, 1) if trainer is None else (trainer.global_rank, trainer.world_size)

    def train_dataloader(self) -> DataLoader:
        """Shuffled training windows: (inputs `[B, L']`, targets `[B, L']`), L' <= L.

        One dataset call per batch (batch_size=None + a batch sampler): no per-row collation.
        With several ranks each takes its part of every batch (`RankSlices`).
        """
        rank, world = self._ranks()
        batches: Any
        if self.bucket_by_length:
            batches = LengthBucketBatches(self.train_set.lengths, self.batch_size, self.seed)
        else:  # every rank must draw the same order: a seeded generator when there are several
            gen = torch.Generator().manual_seed(self.seed) if world > 1 else None
            order = RandomSampler(self.train_set, generator=gen)  # type: ignore[arg-type]
            batches = BatchSampler(order, self.batch_size, drop_last=False)
        if world > 1:
            batches = RankSlices(batches, rank, world)
        return DataLoader(
            self.train_set,
            sampler=batches,
            batch_size=None,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        """The validation rounds during training: the fixed `val_users` sample (or all)."""
        return _eval_loader(self.val_set, self.eval_batch_size, self.val_rows, self._ranks())

    def test_dataloader(self) -> DataLoader:
        """Test examples, batched by history length (`row` gives the split order)."""
        return _eval_loader(self.test_set, self.eval_batch_size, ranks=self._ranks())

    def eval_dataloader(self, split: str) -> DataLoader:
        """Every example of `split` ("val" or "test"): the final metrics."""
        return _eval_loader(self.val_set if split == "val" else self.test_set, self.eval_batch_size)
