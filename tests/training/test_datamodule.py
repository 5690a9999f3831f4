"""Windows, padding and batches of the DataModule on hand-worked sequences."""

from types import SimpleNamespace

import numpy as np
import polars as pl
import torch

from training.datamodule import SequenceDataModule, item_counts, make_windows


def _lists(rows: list[list[int]]) -> pl.Series:
    return pl.Series("items", rows, dtype=pl.List(pl.Int64))


def test_long_sequence_cut_into_windows_covering_every_transition() -> None:
    seq = list(range(1, 11))  # 10 items, 9 transitions, L = 4 -> 3 windows
    windows = make_windows(_lists([seq]), max_len=4)
    assert windows.tolist() == [
        [6, 7, 8, 9, 10],
        [2, 3, 4, 5, 6],
        [0, 0, 0, 1, 2],
    ]
    inputs, targets = windows[:, :-1], windows[:, 1:]
    pairs = {(a, b) for a, b in zip(inputs.ravel(), targets.ravel(), strict=True) if b and a}
    assert pairs == {(k, k + 1) for k in range(1, 10)}


def test_short_and_empty_sequences() -> None:
    windows = make_windows(_lists([[5], [3, 4], [], [7, 8, 9, 1, 2]]), max_len=4)
    assert windows.tolist() == [[0, 0, 0, 3, 4], [7, 8, 9, 1, 2]]
    assert make_windows(_lists([[5]]), max_len=3).shape == (0, 4)


def test_exact_multiple_gives_no_empty_window() -> None:
    windows = make_windows(_lists([[1, 2, 3, 4, 5]]), max_len=2)  # 4 transitions -> 2
    assert windows.tolist() == [[3, 4, 5], [1, 2, 3]]


def _splits() -> SimpleNamespace:
    train = pl.DataFrame(
        {"user_idx": [1, 2, 3], "items": [[1, 2, 3, 4, 5, 6], [2, 3], [4]]},
        schema={"user_idx": pl.Int64, "items": pl.List(pl.Int64)},
    )
    ev = pl.DataFrame(
        {"user_idx": [1, 2, 3], "history": [[1, 2, 3, 4, 5, 6], [2, 3], [4]], "target": [7, 4, 5]},
        schema={"user_idx": pl.Int64, "history": pl.List(pl.Int64), "target": pl.Int64},
    )
    return SimpleNamespace(train=train, val=ev, test=ev, num_items=8)


def test_batches_and_eval_examples() -> None:
    dm = SequenceDataModule(_splits(), max_len=3, batch_size=2, eval_batch_size=2)
    batches = list(dm.train_dataloader())
    inputs = torch.cat([b[0] for b in batches])
    targets = torch.cat([b[1] for b in batches])
    assert inputs.shape == (3, 3) and targets.shape == (3, 3)  # user 1: 2 windows, user 2: 1
    assert sorted(map(tuple, targets.tolist())) == [(0, 0, 3), (0, 2, 3), (4, 5, 6)]
    assert sorted(map(tuple, inputs.tolist())) == [(0, 0, 2), (0, 1, 2), (3, 4, 5)]
    assert torch.equal(targets != 0, inputs != 0)
    first = next(iter(dm.val_dataloader()))
    assert first["history"].tolist() == [[4, 5, 6], [0, 2, 3]]
    assert first["target"].tolist() == [7, 4]
    assert first["seen"].tolist() == [[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 2, 3]]
    last = list(dm.test_dataloader())[-1]
    assert last["history"].tolist() == [[0, 0, 4]]
    assert last["seen"].tolist() == [[4]]


def test_item_counts_from_train() -> None:
    counts = item_counts(_splits())
    assert counts.dtype == torch.float32
    assert np.allclose(counts.numpy(), [0, 1, 2, 2, 2, 1, 1, 0, 0])
