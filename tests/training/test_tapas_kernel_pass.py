"""tapas with a midx first pass: the presample's ids are as frequent as their stated inclusion
probabilities, the kept ids and their log q come from it, and the positive's log q is the
inclusion probability of midx's one-draw law."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812

from training.sampler_settings import validate_sampler
from training.samplers import SAMPLERS, SamplerContext

N_ITEMS, DIM, BATCH, NUM, TRIALS = 20, 6, 8, 12, 600
COUNTS = torch.cat([torch.zeros(1), torch.arange(1, N_ITEMS + 1, dtype=torch.float32)])


def _sampler(seed: int = 0):
    torch.manual_seed(seed)
    ctx = SamplerContext(num_items=N_ITEMS, item_counts=COUNTS.clone(), temperature=0.5)
    cfg = validate_sampler({"name": "tapas", "num_negatives": NUM, "ratio": 1.5,
                            "first_pass": "midx", "codewords": 3})  # fmt: skip
    sampler = SAMPLERS["tapas"](cfg, ctx)
    table = F.normalize(torch.randn(N_ITEMS + 1, DIM), dim=1)
    table[0] = 0.0
    sampler.refresh(table)
    return sampler, F.normalize(torch.randn(BATCH, DIM), dim=1)


def test_presample_frequencies_match_their_inclusion_probabilities() -> None:
    sampler, queries = _sampler(seed=1)
    positives = torch.randint(1, N_ITEMS + 1, (BATCH,))
    hits = torch.zeros(N_ITEMS + 1, dtype=torch.float64)
    stated = torch.zeros(N_ITEMS + 1, dtype=torch.float64)
    for _ in range(TRIALS):
        pre = sampler.sample(queries, positives, NUM).presample
        assert torch.equal(pre.ids, torch.unique(pre.ids))  # distinct ids, sorted
        hits[pre.ids] += 1.0
        stated[pre.ids] = pre.log_q.double().exp()  # one law: the same for every call
    one_draw = sampler.proposal_log_probs(queries)[0].double().exp()
    draws = math.ceil(1.5 * NUM)
    inclusion = 1.0 - (1.0 - one_draw) ** draws
    seen = hits > 0
    torch.testing.assert_close(stated[seen], inclusion[seen], atol=1e-5, rtol=1e-4)
    assert float((hits / TRIALS - inclusion).abs().max()) < 0.07  # binomial noise at 600 trials


def test_kept_ids_and_log_q_come_from_the_presample() -> None:
    sampler, queries = _sampler()
    positives = torch.randint(1, N_ITEMS + 1, (BATCH,))
    neg = sampler.sample(queries, positives, NUM)
    pre = neg.presample
    assert 1 <= len(neg.ids) <= NUM and len(torch.unique(neg.ids)) == len(neg.ids)
    where = torch.searchsorted(pre.ids, neg.ids)
    assert torch.equal(pre.ids[where], neg.ids) and torch.equal(neg.log_q, pre.log_q[where])
    one_draw = sampler.proposal_log_probs(queries)[0].double().exp()[positives]
    expected = torch.log(1.0 - (1.0 - one_draw) ** math.ceil(1.5 * NUM))
    torch.testing.assert_close(neg.pos_log_q.double(), expected, atol=1e-5, rtol=1e-4)


def test_an_update_moves_rows_in_the_first_pass_too_and_sparse_tables_refit_it() -> None:
    sampler, queries = _sampler()
    assert validate_sampler({"name": "tapas", "first_pass": "midx"}).refits_sparse
    assert not validate_sampler({"name": "tapas"}).refits_sparse
    before = sampler.proposal_log_probs(queries)
    rows, moved = torch.tensor([1, 2, 3]), -F.normalize(torch.randn(3, DIM), dim=1)
    sampler.update(rows, moved)
    assert not torch.allclose(sampler.proposal_log_probs(queries), before)
    assert torch.equal(sampler.items[rows], moved)  # the second pass scores the new rows
