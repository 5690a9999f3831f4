"""Windows, padding and batches of the DataModule on hand-worked sequences."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import pytorch_lightning as pl_lightning
import torch

from data.errors import RecsysInputError
from data.split import Splits
from tests.training.tiny import TINY, tiny_home
from training.config_loading import load_config
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.examples import TrainWindows, make_windows
from training.loop.trainer import fit


def _lists(rows: list[list[int]]) -> pl.Series:
    return pl.Series("items", rows, dtype=pl.List(pl.Int64))


def _splits() -> Splits:
    train = pl.DataFrame(
        {"user_idx": [1, 2, 3], "items": [[1, 2, 3, 4, 5, 6], [2, 3], [4]]},
        schema={"user_idx": pl.Int64, "items": pl.List(pl.Int64)},
    )
    ev = pl.DataFrame(
        {"user_idx": [1, 2, 3], "history": [[1, 2, 3, 4, 5, 6], [2, 3], [4]], "target": [7, 4, 5]},
        schema={"user_idx": pl.Int64, "history": pl.List(pl.Int64), "target": pl.Int64},
    )
    return Splits(train=train, val=ev, test=ev, num_items=8)


def test_batches_and_eval_examples() -> None:
    dm = SequenceDataModule(_splits(), max_len=3, batch_size=2, eval_batch_size=2)
    batches = list(dm.train_dataloader())
    inputs = torch.cat([b[0] for b in batches])
    targets = torch.cat([b[1] for b in batches])
    assert inputs.shape == (3, 3) and targets.shape == (3, 3)  # user 1: 2 windows, user 2: 1
    assert sorted(map(tuple, targets.tolist())) == [(0, 0, 3), (0, 2, 3), (4, 5, 6)]
    assert sorted(map(tuple, inputs.tolist())) == [(0, 0, 2), (0, 1, 2), (3, 4, 5)]
    assert torch.equal(targets != 0, inputs != 0)
    first, last = list(dm.val_dataloader())  # batched by history length, shortest first
    assert first["row"].tolist() == [2, 1] and last["row"].tolist() == [0]
    assert first["history"].tolist() == [[0, 4], [2, 3]]  # common left padding trimmed
    assert first["target"].tolist() == [5, 4]
    assert first["seen"].tolist() == [[0, 4], [2, 3]]
    assert last["history"].tolist() == [[4, 5, 6]] and last["target"].tolist() == [7]
    assert last["seen"].tolist() == [[1, 2, 3, 4, 5, 6]]
    in_split_order = dm.test_set[[0, 1]]
    assert in_split_order["history"].tolist() == [[4, 5, 6], [0, 2, 3]]
    assert in_split_order["seen"].tolist() == [[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 2, 3]]


def test_item_counts_from_train() -> None:
    counts = item_counts(_splits())
    assert counts.dtype == torch.float32
    assert np.allclose(counts.numpy(), [0, 1, 2, 2, 2, 1, 1, 0, 0])


def test_length_buckets_cover_every_window_once_and_trim() -> None:
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(1, 50, size=int(k))) for k in rng.integers(2, 30, size=300)]
    train = pl.DataFrame(
        {"user_idx": range(300), "items": rows},
        schema={"user_idx": pl.Int64, "items": pl.List(pl.Int64)},
    )
    ev = pl.DataFrame(
        schema={"user_idx": pl.Int64, "history": pl.List(pl.Int64), "target": pl.Int64}
    )
    splits = Splits(train=train, val=ev, test=ev, num_items=50)
    plain = SequenceDataModule(splits, max_len=20, batch_size=16)
    bucketed = SequenceDataModule(splits, max_len=20, batch_size=16, bucket_by_length=True)

    def pairs(dm: SequenceDataModule) -> tuple[list, list]:
        seen, widths = [], []
        for inputs, targets in dm.train_dataloader():
            widths.append(inputs.shape[1])
            keep = targets != 0
            prev = torch.nn.functional.pad(inputs, (1, 0))[:, :-1]  # item before each input
            seen += list(
                zip(prev[keep].tolist(), inputs[keep].tolist(), targets[keep].tolist(), strict=True)
            )
        return sorted(seen), widths

    plain_pairs, plain_widths = pairs(plain)
    bucket_pairs, bucket_widths = pairs(bucketed)
    assert bucket_pairs == plain_pairs  # the same training signal, every window once
    assert set(plain_widths) == {20}
    assert np.mean(bucket_widths) < 0.75 * 20  # short windows batched together, padding cut
    loader = bucketed.train_dataloader()  # Lightning iterates one loader per epoch
    epoch1 = [b[0].shape for b in loader]
    epoch2 = [b[0].shape for b in loader]
    assert len(epoch1) == len(plain_widths) and epoch1 != epoch2  # reshuffled per epoch


def test_validation_rounds_rank_a_fixed_user_sample_final_metrics_all() -> None:
    ev = pl.DataFrame(
        {"history": [[1 + k % 7] * (1 + k % 5) for k in range(40)], "target": [2] * 40},
        schema={"history": pl.List(pl.Int64), "target": pl.Int64},
    )
    splits = Splits(train=_splits().train, val=ev, test=ev, num_items=8)
    dm = SequenceDataModule(splits, max_len=3, batch_size=2, eval_batch_size=8, val_users=10)
    rounds = [sorted(torch.cat([b["row"] for b in dm.val_dataloader()]).tolist()) for _ in "ab"]
    assert rounds[0] == rounds[1] and len(rounds[0]) == 10 and len(set(rounds[0])) == 10
    every = torch.cat([b["row"] for b in dm.eval_dataloader("val")])
    assert sorted(every.tolist()) == list(range(40))
    all_users = SequenceDataModule(splits, max_len=3, batch_size=2, eval_batch_size=8)
    assert sum(len(b["row"]) for b in all_users.val_dataloader()) == 40


def test_last_targets_give_one_window_per_transition_with_its_whole_context() -> None:
    seqs = _lists([[1, 2, 3, 4, 5], [7], [8, 9]])
    windows = make_windows(seqs, max_len=2, every_prefix=True)
    assert windows.tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [0, 8, 9]]
    data = SequenceDataModule(_splits(), max_len=3, batch_size=64, targets="last")
    inputs, targets = data.train_set[list(range(len(data.train_set)))]
    assert (targets[:, :-1] == 0).all() and (targets[:, -1] > 0).all()
    # every transition of the training sequences is a target exactly once: 5 + 1
    assert sorted(zip(inputs[:, -1].tolist(), targets[:, -1].tolist(), strict=True)) == [
        (1, 2), (2, 3), (2, 3), (3, 4), (4, 5), (5, 6)
    ]  # fmt: skip
    every = SequenceDataModule(_splits(), max_len=3, batch_size=64)
    assert len(every.train_set) < len(data.train_set)


def test_a_rank_of_a_sharded_training_validates_its_whole_shard() -> None:
    """Its shard is its rank's alone: no second cut of the examples across the ranks."""
    from types import SimpleNamespace

    base = _splits()
    shard = Splits(base.train, base.val, base.test, base.num_items, shard=(1, 2))
    for splits, expected in ((shard, 3), (base, 1)):  # unsharded: every 2nd example of 3
        dm = SequenceDataModule(splits, max_len=3, batch_size=2, eval_batch_size=8)
        dm.trainer = SimpleNamespace(global_rank=1, world_size=2)  # type: ignore[assignment]
        assert sum(len(b["row"]) for b in dm.val_dataloader()) == expected
        assert sum(len(b["row"]) for b in dm.test_dataloader()) == expected


def test_a_resumed_fit_orders_its_epoch_as_the_uninterrupted_one_did() -> None:
    from training.loop.batching import LengthBucketBatches, RankSlices

    lengths = np.random.default_rng(1).integers(1, 30, size=200)
    straight = LengthBucketBatches(lengths, 16, seed=7)
    orders = [list(straight) for _ in range(3)]  # epochs 0, 1, 2 in one fit
    resumed = LengthBucketBatches(lengths, 16, seed=7)
    resumed.set_epoch(2)  # what Lightning calls when a fit resumes in epoch 2
    assert list(resumed) == orders[2] != orders[0]
    ranks = RankSlices(LengthBucketBatches(lengths, 16, seed=7), rank=0, world=2)
    ranks.set_epoch(2)
    assert list(ranks) == [np.array_split(np.asarray(b), 2)[0].tolist() for b in orders[2]]


def test_shuffled_batches_order_each_epoch_by_the_seed_and_the_epoch_alone() -> None:
    from training.loop.batching import ShuffledBatches

    straight = ShuffledBatches(50, 8, seed=3)
    orders = [list(straight) for _ in range(3)]
    assert orders[0] != orders[2] and sorted(sum(orders[2], [])) == list(range(50))
    resumed = ShuffledBatches(50, 8, seed=3)
    resumed.set_epoch(2)  # a fit resumed in epoch 2 orders it as the uninterrupted fit did
    assert list(resumed) == orders[2]


def test_a_loader_restored_from_its_state_gives_the_rest_of_that_epoch() -> None:
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(1, 50, size=int(k))) for k in rng.integers(2, 30, size=100)]
    train = pl.DataFrame(
        {"user_idx": range(100), "items": rows},
        schema={"user_idx": pl.Int64, "items": pl.List(pl.Int64)},
    )
    splits = Splits(train=train, val=_splits().val, test=_splits().test, num_items=50)
    for bucketed in (True, False):
        dm = SequenceDataModule(splits, max_len=5, batch_size=16, bucket_by_length=bucketed)
        loader = dm.train_dataloader()
        loader.sampler.set_epoch(1)
        whole = [targets.tolist() for _, targets in loader]
        loader.sampler.set_epoch(1)
        batches = iter(loader)
        head = [next(batches)[1].tolist() for _ in range(3)]
        state = loader.state_dict()
        assert state == {"epoch": 1, "batches": 3} and head == whole[:3]
        again = dm.train_dataloader()  # a new process: the checkpoint's state, then one pass
        again.load_state_dict(state)
        assert [targets.tolist() for _, targets in again] == whole[3:]
        assert again.state_dict() == {"epoch": 1, "batches": len(whole)} == {
            "epoch": 1, "batches": len(again)
        }  # fmt: skip
        # a checkpoint at the epoch's last batch: Lightning creates a pass it never starts,
        # then the next epoch's, which is whole
        ended = dm.train_dataloader()
        ended.load_state_dict({"epoch": 1, "batches": len(whole)})
        iter(ended)
        ended.sampler.set_epoch(2)
        assert len(list(ended)) == len(whole)


class _KillAfter(pl_lightning.Callback):
    """Raises after `steps` training steps: a run killed where it stands."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.lightning_module.clock.steps >= self.steps:
            raise RuntimeError("killed")


@pytest.mark.parametrize("bucketed", [True, False])
def test_a_fit_resumed_inside_an_epoch_trains_each_window_of_that_epoch_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bucketed: bool
) -> None:
    """Killed after a round inside epoch 1 and resumed: the epoch's batches already trained
    are not trained again, and the rest are (its order is epoch 1's, not epoch 0's)."""
    given: list[list[int]] = []  # the rows of every training batch, in order
    getitem = TrainWindows.__getitem__

    def recorded(self: TrainWindows, rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        given.append(list(rows))
        return getitem(self, rows)

    monkeypatch.setattr(TrainWindows, "__getitem__", recorded)
    splits, run = tiny_home(tmp_path)[1], tmp_path / "home" / "runs" / "r"
    cfg = load_config(overrides=[
        *TINY, "train.val_every_steps=2", "train.max_epochs=2", "train.patience=50",
        f"train.bucket_by_length={bucketed}",
    ])  # fmt: skip
    data = SequenceDataModule(splits, 10, 32, bucket_by_length=bucketed)
    per_epoch, windows = len(data.train_dataloader()), len(data.train_set)
    kill = SimpleNamespace(apply=lambda module: [_KillAfter(per_epoch + 3)])  # inside epoch 1
    with pytest.raises(RuntimeError, match="killed"):
        fit(cfg, splits, run, start=kill, resumable=True)
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["clock"]["steps"]
    assert per_epoch < saved < per_epoch + 3  # the last round before the kill, in epoch 1
    trained, given[:] = given[per_epoch:saved], []  # epoch 1's batches the checkpoint holds
    fit(cfg, splits, run, resumable=True)
    assert len(given) == per_epoch - len(trained)  # the rest of epoch 1, then the fit ends
    assert sorted(row for batch in trained + given for row in batch) == list(range(windows))


def test_item_mask_drops_earlier_input_items_never_the_newest_nor_a_target() -> None:
    seqs = _lists([list(range(1, 41))])
    windows = make_windows(seqs, max_len=30, every_prefix=True)
    rows = list(range(len(windows)))
    plain_inputs, plain_targets = TrainWindows(windows, last_only=True)[rows]
    torch.manual_seed(0)
    inputs, targets = TrainWindows(windows, last_only=True, mask=0.5)[rows]
    assert torch.equal(targets, plain_targets)
    assert torch.equal(inputs[:, -1], plain_inputs[:, -1])
    dropped = (inputs == 0) & (plain_inputs != 0)
    share = dropped.sum() / (plain_inputs[:, :-1] != 0).sum()
    assert 0.45 < float(share) < 0.55  # 1,170 earlier items, each dropped with chance 0.5
    assert ((inputs == plain_inputs) | dropped).all()  # an item is kept or made padding
    torch.manual_seed(1)
    again, _ = TrainWindows(windows, last_only=True, mask=0.5)[rows]
    assert not torch.equal(again, inputs)  # drawn anew each time the windows are read


def test_item_mask_needs_one_target_per_window() -> None:
    with pytest.raises(RecsysInputError, match="item_mask needs train.targets=last"):
        load_config(overrides=["train.item_mask=0.2", "train.targets=all"])
    train = load_config(overrides=["train.item_mask=0.2"]).train
    assert SequenceDataModule.of(_splits(), train, max_len=3).train_set.mask == 0.2
