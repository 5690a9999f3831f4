"""Sampler diagnostics: how far a sampler's proposal is from the model's softmax (its bias).

`proposal_kl` is what the LightningModule logs as `val/proposal_kl` once per validation round
(`ValidationRound.proposal_kl`, on the round's first `eval_batch_size` users).
"""

from __future__ import annotations

import torch
from torch import Tensor

from training.samplers import NegativeSampler

_CHUNK = 1 << 23  # floats of one [queries, n] block


@torch.no_grad()
def proposal_kl(
    sampler: NegativeSampler,
    queries: Tensor,
    item_emb: Tensor,
    temperature: float,
    absolute: bool = False,
) -> float:
    """Mean over queries of KL(model softmax || sampler proposal) over items 1..n.

    Queries are measured in blocks of 2^23 / n rows (a whole 512-query validation batch up to
    n = 16,384). A shared proposal depends on its batch (the kernel samplers' summed kernel,
    the exact sampler's and `mixed`'s mixtures), so above that size it is each block's.

    Args:
        sampler: The sampler; its `proposal_log_probs(queries) -> [N, n + 1]` (for `tapas`,
            the first pass) is what is measured.
        queries: `[N, d]` query embeddings.
        item_emb: `[n + 1, d]` item embeddings (row 0 is padding and is left out).
        temperature: The model's softmax temperature (logit = h . c / temperature).
        absolute: The model predicts softmax(|o|) (absolute-softmax training).

    Returns:
        The mean KL in nats (inf where the proposal gives 0 to an item the model does not).

    """
    items = item_emb[1:].to(queries)
    step = max(1, _CHUNK // max(1, items.shape[0]))
    total = 0.0
    for first in range(0, queries.shape[0], step):
        q = queries[first : first + step]
        scores = q @ items.T
        log_p = torch.log_softmax((scores.abs() if absolute else scores) / temperature, dim=-1)
        log_q = sampler.proposal_log_probs(q)[:, 1:].to(log_p)
        terms = log_p.exp() * (log_p - log_q)
        terms = torch.where(log_p.exp() > 0, terms, torch.zeros_like(terms))
        total += float(terms.sum())
    return total / queries.shape[0]
