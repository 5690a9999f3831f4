"""The logQ correction makes the sampled-softmax gradient approach the full-softmax gradient.

On a fixed batch of a fitted-looking model (each query's positive is its best-scoring item,
so the positive's probability is large and a wrong normaliser shows), the gradient w.r.t. the
query and item embeddings, averaged over many negative draws, is compared with the exact
full-softmax gradient. With the correction the relative error is small; the same draws with
`log_q = 0` (no correction) give a clearly biased gradient, so the bound fails without it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from training.full_softmax import full_softmax_loss
from training.losses import get_loss
from training.sampler_settings import validate_sampler
from training.samplers import SAMPLERS, Negatives, SamplerContext

N_ITEMS, DIM, BATCH, TAU, DRAWS = 40, 8, 12, 0.15, 200


@pytest.fixture(scope="module")
def batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    items = F.normalize(torch.randn(N_ITEMS + 1, DIM, generator=gen), dim=1)
    queries = F.normalize(torch.randn(BATCH, DIM, generator=gen), dim=1)
    positives = (queries @ items[1:].T).argmax(1) + 1
    counts = torch.cat([torch.zeros(1), torch.rand(N_ITEMS, generator=gen) * 50 + 1])
    return {"items": items, "queries": queries, "positives": positives, "counts": counts}


def _grad(b: dict[str, torch.Tensor], loss_of) -> torch.Tensor:
    """Flattened gradient `[(B + n + 1) * d]` of `loss_of(Q, E)` w.r.t. queries and items."""
    q = b["queries"].clone().requires_grad_()
    e = b["items"].clone().requires_grad_()
    loss_of(q, e).backward()
    return torch.cat([q.grad.flatten(), e.grad.flatten()])


def _full_grad(b: dict[str, torch.Tensor]) -> torch.Tensor:
    return _grad(b, lambda q, e: full_softmax_loss(q, e, b["positives"], TAU, chunk=N_ITEMS))


def _mean_sampled_grad(b, sampler, num: int, correct: bool) -> torch.Tensor:
    torch.manual_seed(1)
    total = torch.zeros(0)
    pos = b["positives"]
    for _ in range(DRAWS):
        neg = sampler.sample(b["queries"], pos, num)
        if not correct:
            neg = Negatives(neg.ids, None, None)

        def loss_of(q, e, neg=neg):
            cand = e[neg.ids]
            neg_scores = q @ cand.T if neg.ids.dim() == 1 else torch.einsum("nd,nmd->nm", q, cand)
            return get_loss("sampled_softmax")((q * e[pos]).sum(1), neg_scores, neg, pos, TAU)

        g = _grad(b, loss_of)
        total = g if total.numel() == 0 else total + g
    return total / DRAWS


def _rel_err(g: torch.Tensor, ref: torch.Tensor) -> float:
    return float((g - ref).norm() / ref.norm())


def _sampler(b, name: str, per_query: bool):
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=b["counts"], temperature=TAU)
    alpha = {"alpha": 1.0} if name == "popularity" else {}
    cfg = validate_sampler({"name": name, "per_query": per_query, **alpha})
    sampler = SAMPLERS[name](cfg, ctx)
    sampler.refresh(b["items"])
    return sampler


@pytest.mark.parametrize(
    ("name", "per_query", "num"),
    [
        ("exact", True, 32),
        ("exact", False, 32),
        ("uniform", False, 400),
        ("popularity", False, 200),
    ],
)
def test_corrected_gradient_approaches_full_and_uncorrected_does_not(
    batch, name: str, per_query: bool, num: int
) -> None:
    full = _full_grad(batch)
    sampler = _sampler(batch, name, per_query)
    corrected = _mean_sampled_grad(batch, sampler, num, correct=True)
    uncorrected = _mean_sampled_grad(batch, sampler, num, correct=False)
    assert _rel_err(corrected, full) < 0.06
    assert float(F.cosine_similarity(corrected, full, dim=0)) > 0.998
    assert _rel_err(uncorrected, full) > 0.15


def test_corrected_bias_shrinks_as_m_grows(batch) -> None:
    full = _full_grad(batch)
    sampler = _sampler(batch, "uniform", per_query=False)
    small = _rel_err(_mean_sampled_grad(batch, sampler, 8, correct=True), full)
    large = _rel_err(_mean_sampled_grad(batch, sampler, 400, correct=True), full)
    assert large < 0.5 * small
