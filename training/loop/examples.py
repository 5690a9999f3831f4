"""Training windows and evaluation examples of per-user sequences, in numpy (no per-item loop).

Training: every train sequence is cut, from its end, into windows of L + 1 items that overlap by
one item, so each transition is predicted exactly once; the earliest (short) window is
left-padded with 0. A window gives input `[L]` and targets `[L]` (0 = no target).
Evaluation: history left-padded to `[L]` (most recent last), one target, and the full history
(padded to the batch's longest) for excluding seen items.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import torch
from torch import Tensor
from torch.utils.data import Dataset


def flatten(lists: pl.Series) -> tuple[np.ndarray, np.ndarray]:
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
    flat, offsets = flatten(sequences)
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


def masked(inputs: Tensor, share: float) -> Tensor:
    """`inputs [B, L]`, each item but the newest (last column) made padding with chance `share`.

    A fresh draw of torch's generator each call; `share` 0 returns `inputs` itself.
    """
    if share == 0.0:
        return inputs
    dropped = torch.rand(inputs.shape) < share
    dropped[:, -1] = False
    return inputs.masked_fill(dropped, 0)


class TrainWindows(Dataset[tuple[Tensor, Tensor]]):
    """Training windows; indexing with a list of rows returns a whole batch at once."""

    def __init__(
        self, windows: np.ndarray, trim: bool = False, last_only: bool = False, mask: float = 0.0
    ) -> None:
        self.windows = torch.from_numpy(np.ascontiguousarray(windows, dtype=np.int64))
        self.trim = trim
        self.last_only = last_only  # only the window's last position has a target
        self.mask = mask  # `train.item_mask`: the share of earlier input items dropped

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
            inputs = masked(inputs, self.mask)
        if self.trim:
            inputs, targets = trim_left(inputs, targets)
        return inputs, targets


class EvalExamples(Dataset[dict[str, Tensor]]):
    """Leave-one-out style examples: a history and the one target to rank."""

    def __init__(self, frame: pl.DataFrame, max_len: int) -> None:
        self.flat, self.offsets = flatten(frame["history"])
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
