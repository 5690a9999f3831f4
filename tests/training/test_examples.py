"""Training windows and padding on hand-worked sequences."""

import polars as pl
import torch

from training.loop.examples import make_windows, trim_left


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


def test_trim_left_drops_only_common_padding() -> None:
    inputs = torch.tensor([[0, 0, 0, 5], [0, 0, 2, 3]])
    targets = torch.tensor([[0, 0, 0, 9], [0, 0, 3, 4]])
    a, b = trim_left(inputs, targets)
    assert a.tolist() == [[0, 5], [2, 3]] and b.tolist() == [[0, 9], [3, 4]]
    assert trim_left(torch.zeros(2, 3, dtype=torch.long))[0].shape == (2, 1)
