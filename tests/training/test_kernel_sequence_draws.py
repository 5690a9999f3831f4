"""Kernel draws shared by the positions of a history (`per_sequence`), and their mixture log q."""

from __future__ import annotations

import math

import pytest
import torch

from tests.training.frequency import chi2_pvalue
from training.config_loading import load_config
from training.loop.module_build import build_module
from training.sampler_settings import validate_sampler
from training.samplers import SamplerContext, build_sampler

N, D, TAU = 60, 6, 0.25


def unit(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(*shape, generator=gen), dim=-1)


def sequence_sampler(name: str):
    cfg = validate_sampler({"name": name, "per_sequence": True, "leaf_size": 4, "features": 16}
                           if name == "rff" else {"name": name, "per_sequence": True})  # fmt: skip
    sampler = build_sampler(cfg, SamplerContext(N, torch.ones(N + 1), temperature=TAU))
    table = unit(N + 1, D, seed=0)
    table[0] = 0.0
    sampler.refresh(table)
    return sampler, table


@pytest.mark.parametrize("name", ["quadratic", "rff"])
def test_each_history_draws_from_its_summed_kernel_and_says_so(name: str) -> None:
    """Every position of a history gets the history's m draws; log q is log m + the log of
    the mixture sum_t K(h_t, c) / sum_t Z_t at each draw and at each position's positive, and
    the draws' frequencies follow it (quadratic: against the kernel itself, no tree in the
    reference; rff: against the tree's own brute force of the summed kernel)."""
    sampler, table = sequence_sampler(name)
    h = unit(7, D, seed=3)
    groups = torch.tensor([5, 5, 2, 5, 2, 9, 9])  # three histories, queries interleaved
    positives = torch.tensor([1, 50, 60, 3, 3, 17, 40])
    torch.manual_seed(0)
    neg = sampler.sample(h, positives, 20_000, groups=groups)
    assert neg.ids.shape == neg.log_q.shape == (7, 20_000)
    for g in (5, 2, 9):
        mine = groups == g
        if name == "quadratic":
            kernel = (100 * (h[mine] @ table[1:].T / TAU) ** 2 + 1).sum(0)
            q = torch.cat([torch.zeros(1), kernel / kernel.sum()])
        else:
            q = sampler.tree.log_prob_all(h[mine], shared=True)[0].exp()
        ids, log_q = neg.ids[mine], neg.log_q[mine]
        assert (ids == ids[0]).all() and (log_q == log_q[0]).all()
        torch.testing.assert_close(log_q[0], math.log(20_000) + q[ids[0]].log(), atol=1e-4, rtol=0)
        torch.testing.assert_close(
            neg.pos_log_q[mine], math.log(20_000) + q[positives[mine]].log(), atol=1e-4, rtol=0
        )
        counts = torch.bincount(ids[0], minlength=N + 1).numpy()[1:]
        assert chi2_pvalue(counts, q[1:].double().numpy()) > 1e-3, g


def test_without_histories_a_sequence_sampler_draws_per_query() -> None:
    sampler, _ = sequence_sampler("rff")
    neg = sampler.sample(unit(3, D, seed=1), torch.tensor([1, 2, 3]), 16)
    assert neg.ids.shape == (3, 16)


def test_per_sequence_needs_per_query_draws() -> None:
    with pytest.raises(ValueError, match="per_query"):
        validate_sampler({"name": "rff", "per_query": False, "per_sequence": True})


def test_a_training_step_shares_the_draws_of_each_history() -> None:
    n = 300
    counts = torch.cat([torch.zeros(1), torch.ones(n)])
    cfg = load_config(overrides=[
        "sampler.name=rff", "sampler.per_sequence=true", "sampler.features=16",
        "sampler.leaf_size=4", "sampler.num_negatives=8", "model.dim=8", "model.max_len=5",
        "model.tower=mean", "model.normalize=true", "train.sparse_embeddings=true",
        "train.precision=fp32",
    ])  # fmt: skip
    module = build_module(cfg, n, counts)
    module.on_train_start()
    seen = []
    draw = module.sampler.sample
    module.sampler.sample = lambda *a, **k: seen.append((k["groups"], out := draw(*a, **k))) or out
    seq = torch.randint(1, n + 1, (4, 6), generator=torch.Generator().manual_seed(1))
    inputs, targets = seq[:, :-1], seq[:, 1:].clone()
    targets[0, :2] = 0  # positions without a target are not queries
    loss = module.optimisation_step((inputs, targets), module.standalone_optimizers(),
                                    torch.Tensor.backward)  # fmt: skip
    assert torch.isfinite(loss)
    ((groups, neg),) = seen
    assert groups.tolist() == [0] * 3 + [1] * 5 + [2] * 5 + [3] * 5
    for g in range(4):
        rows = neg.ids[groups == g]
        assert (rows == rows[0]).all()
