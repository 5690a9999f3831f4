"""The ranks' helpers and the samplers across ranks, in two real gloo processes.

Each test spawns two processes that join one process group (gloo, a file store) and run a
function of this module; an assertion failing in either process fails the test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from training import distributed
from training.loop.batching import EqualCount, RankSlices, ShuffledBatches
from training.sampler_settings import validate_sampler
from training.samplers import SamplerContext, build_sampler

N_ITEMS = 300
COUNTS = torch.cat([torch.zeros(1), 1000.0 / torch.arange(1, N_ITEMS + 1)])  # Zipf-like


def _entry(rank: int, fn: Callable[..., None], store: str, args: tuple[Any, ...]) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        fn(rank, *args)
    finally:
        dist.destroy_process_group()


def on_two_ranks(tmp_path: Path, fn: Callable[..., None], *args: Any) -> None:
    """Run `fn(rank, *args)` in two processes of one process group."""
    mp.spawn(_entry, args=(fn, str(tmp_path / "store"), args), nprocs=2, join=True)


def _collectives(rank: int) -> None:
    assert distributed.active() and distributed.rank_and_world() == (rank, 2)
    rows = torch.arange(3 * 2).reshape(3, 2) if rank == 0 else torch.tensor([[7, 8]])
    assert distributed.gather_rows(rows).tolist() == [[0, 1], [2, 3], [4, 5], [7, 8]]
    assert distributed.gather_union(torch.tensor([5, 1] if rank else [1, 3])).tolist() == [1, 3, 5]
    assert distributed.total(rank + 1) == 3
    assert float(distributed.average(torch.tensor(float(rank)))) == 0.5
    assert distributed.from_rank_zero(10.0 + rank) == 10.0
    assert distributed.rows_of_rank_zero(torch.arange(4 + rank)).tolist() == [0, 1, 2, 3]
    distributed.check_same(1.5, "a value both ranks hold")
    with pytest.raises(RuntimeError, match="a drifted value differs across ranks"):
        distributed.check_same(1.0 + rank, "a drifted value")


def test_collectives_of_two_ranks(tmp_path: Path) -> None:
    on_two_ranks(tmp_path, _collectives)


def test_one_process_helpers_are_the_identity() -> None:
    rows = torch.arange(6).reshape(3, 2)
    assert not distributed.active() and distributed.rank_and_world() == (0, 1)
    assert distributed.gather_rows(rows) is rows and distributed.total(4) == 4
    distributed.check_same(float("nan"), "anything")  # nothing to compare with


def test_rank_slices_make_up_each_batch_and_skip_batches_smaller_than_the_ranks() -> None:
    batches = [[0, 1, 2, 3, 4], [5, 6, 7], [8]]
    parts = [list(RankSlices(batches, rank, 2)) for rank in range(2)]
    assert [a + b for a, b in zip(*parts, strict=True)] == batches[:2]
    assert len(parts[0]) == len(parts[1]) == 2


def test_rank_slices_count_only_the_batches_they_give() -> None:
    """Lightning ends an epoch (and validates) at the loader's length: it must be exact."""
    slices = RankSlices([[0, 1, 2, 3, 4], [5, 6, 7], [8]], 0, 2)
    assert len(slices) == 2 == len(list(slices))
    shuffled = RankSlices(ShuffledBatches(33, 16, seed=1), 1, 2)  # batches of 16, 16 and 1
    want = [b[8:] for b in ShuffledBatches(33, 16, seed=1) if len(b) >= 2]  # epoch 0's order
    assert len(shuffled) == 2 and list(shuffled) == want  # counting did not move the epoch on


def test_equal_count_cuts_short_or_tops_up_from_another_pass() -> None:
    batches = [[0, 1], [2, 3], [4]]
    assert list(EqualCount(batches, 2)) == batches[:2]
    topped = EqualCount(batches, 5)
    assert len(topped) == 5 and list(topped) == [*batches, *batches[:2]]
    assert list(EqualCount([], 0)) == []
    drawn = EqualCount(ShuffledBatches(20, 4, seed=1), 3)
    drawn.set_epoch(2)  # passed on: the batches are epoch 2's, as a resumed fit needs
    epoch_2 = ShuffledBatches(20, 4, seed=1)
    epoch_2.set_epoch(2)
    assert list(drawn) == list(epoch_2)[:3]
    with pytest.raises(ValueError, match="no batches"):
        EqualCount([], 1)


def _in_batch_frequencies(rank: int, trials: int, per_rank: int) -> None:
    sampler = build_sampler(validate_sampler({"name": "in-batch"}), SamplerContext(N_ITEMS, COUNTS))
    p = (COUNTS / COUNTS.sum()).double()
    torch.manual_seed(100 + rank)  # each rank its own positives
    counts = torch.zeros(N_ITEMS + 1, dtype=torch.float64)
    for _ in range(trials):
        positives = torch.multinomial(p.float(), per_rank, replacement=True)
        neg = sampler.sample(torch.zeros(per_rank, 4), positives, 0)
        assert neg.ids.shape == (2 * per_rank,) and neg.log_q is not None
        assert torch.allclose(neg.log_q.double(), torch.log(2 * per_rank * p[neg.ids]), atol=1e-5)
        counts += torch.bincount(neg.ids, minlength=N_ITEMS + 1).double()
    expected = 2 * per_rank * p  # exp(log_q): the whole batch's N = 2 x per_rank draws
    z = (counts / trials - expected)[1:] / torch.sqrt(expected[1:] / trials)
    assert float(z.abs().max()) < 5.0


def test_cross_rank_in_batch_negatives_log_q_matches_their_frequency(tmp_path: Path) -> None:
    on_two_ranks(tmp_path, _in_batch_frequencies, 1500, 32)


def _tapas(shards: int) -> Any:
    cfg = validate_sampler({
        "name": "tapas", "shards": shards, "ratio": 8, "num_negatives": 16,
        "temperature": 0.5, "temperature_final": None,
    })  # fmt: skip
    sampler = build_sampler(cfg, SamplerContext(N_ITEMS, COUNTS, temperature=0.1))
    sampler.refresh(torch.nn.functional.normalize(torch.randn(N_ITEMS + 1, 8, generator=_gen())))
    return sampler


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(7)


def _tapas_over_ranks(rank: int) -> None:
    sampler = _tapas(shards=2)
    queries = torch.randn(40, 8, generator=_gen())
    pre_ids = torch.randperm(N_ITEMS, generator=_gen())[:128].sort().values + 1
    alone = sampler.select(queries, pre_ids, 16)  # one process, k = 2 shards, whole batch
    mine = queries[:25] if rank == 0 else queries[25:]  # the ranks' unequal parts
    assert torch.equal(sampler.select(mine, pre_ids, 16, over_ranks=True), alone)
    torch.manual_seed(rank)  # different random streams: the presample still comes from rank 0
    neg = sampler.sample(mine, torch.tensor([1, 2]), 16)
    assert neg.presample is not None
    both = distributed.gather_rows(neg.presample.ids)
    assert torch.equal(both[: len(both) // 2], both[len(both) // 2 :])
    distributed.check_same(float(neg.ids.double().sum()), "the kept negatives")


def test_tapas_over_two_ranks_keeps_what_one_process_keeps_with_two_shards(tmp_path: Path) -> None:
    on_two_ranks(tmp_path, _tapas_over_ranks)


def test_one_shard_selection_is_algorithm_1() -> None:
    sampler = _tapas(shards=1)
    queries = torch.randn(40, 8, generator=_gen())
    pre_ids = torch.arange(1, N_ITEMS + 1)
    scores = sampler.batch_scores(queries, pre_ids)
    assert torch.equal(sampler.select(queries, pre_ids, 16), pre_ids[scores.topk(16).indices])
