"""proposal_kl: hand-worked values, planted ordering of samplers."""

from __future__ import annotations

import math

import pytest
import torch

from training.diagnostics import proposal_kl
from training.sampler_settings import validate_sampler
from training.samplers import SamplerContext, build_sampler


class FixedProposal:
    """A proposal given as a table, to check the KL arithmetic by hand."""

    def __init__(self, log_q: torch.Tensor) -> None:
        self.log_q = log_q

    def proposal_log_probs(self, queries: torch.Tensor) -> torch.Tensor:
        return self.log_q.expand(queries.shape[0], -1)


def test_hand_worked_kl_against_uniform() -> None:
    # Two items with logits 0 and log 3 at temperature 1: p = (1/4, 3/4); q uniform.
    item_emb = torch.tensor([[0.0], [0.0], [math.log(3.0)]])
    queries = torch.tensor([[1.0]])
    q = FixedProposal(torch.tensor([[-math.inf, math.log(0.5), math.log(0.5)]]))
    expected = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert proposal_kl(q, queries, item_emb, 1.0) == pytest.approx(expected, rel=1e-5)
    exact = FixedProposal(torch.tensor([[-math.inf, math.log(0.25), math.log(0.75)]]))
    assert proposal_kl(exact, queries, item_emb, 1.0) == pytest.approx(0.0, abs=1e-6)


def test_absolute_model_softmax_is_over_magnitudes() -> None:
    # Logits -log 3 and 0: the absolute softmax is (3/4, 1/4), the signed one (1/4, 3/4).
    item_emb = torch.tensor([[0.0], [-math.log(3.0)], [0.0]])
    matched = FixedProposal(torch.tensor([[-math.inf, math.log(0.75), math.log(0.25)]]))
    assert proposal_kl(matched, torch.ones(1, 1), item_emb, 1.0, absolute=True) == pytest.approx(
        0.0, abs=1e-6
    )
    assert proposal_kl(matched, torch.ones(1, 1), item_emb, 1.0) > 0.5


def test_planted_clusters_kernel_samplers_beat_uniform_and_exact_is_zero() -> None:
    """Items in 10 tight clusters, queries at cluster centres: the softmax is peaked."""
    gen = torch.Generator().manual_seed(0)
    n, d, temperature = 300, 16, 0.1
    centres = torch.nn.functional.normalize(torch.randn(10, d, generator=gen), dim=-1)
    items = centres.repeat_interleave(30, 0) + 0.15 * torch.randn(n, d, generator=gen)
    table = torch.cat([torch.zeros(1, d), torch.nn.functional.normalize(items, dim=-1)])
    queries = centres[:4]
    ctx = SamplerContext(n, torch.ones(n + 1), temperature=temperature)
    kl = {}
    for name, extra in [
        ("uniform", {}),
        ("exact", {}),
        ("quadratic", {}),
        ("rff", {"features": 256, "nu": 8.0}),
    ]:
        sampler = build_sampler(validate_sampler({"name": name, "per_query": True, **extra}), ctx)
        sampler.refresh(table)
        kl[name] = proposal_kl(sampler, queries, table, temperature)
    assert kl["exact"] == pytest.approx(0.0, abs=1e-4)
    assert kl["rff"] < kl["quadratic"] < kl["uniform"]
    assert kl["uniform"] > 1.0 > kl["rff"]
