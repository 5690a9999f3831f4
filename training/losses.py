"""Training objectives: the full softmax and the sampled losses, all pure functions.

Every sampled loss has one signature::

    loss(pos_logits [N], neg_logits [N, m], neg_ids [m] | [N, m], log_q [m] | [N, m],
         positives [N], *, pos_log_q=None) -> scalar mean over the N queries

Logits arrive already divided by the temperature. `log_q` is the sampler's truth about its
draw (DESIGN.md): the log of the expected number of times each id appears (`log(m q_i)`
for m draws with replacement, `log(b_i)` for Bernoulli inclusion). Accidental hits (a
negative equal to the query's positive) are masked, never resampled: in the softmax-type
losses their logit becomes `finfo.min` (never -inf, which gives NaN gradients when a whole
row is masked), in the binary losses their term is dropped.

`pos_log_q` (optional, `[N]`) is the positive's own `log(m q)`; only `nce` and `blackout`
use it, because their objectives weigh the positive by its noise probability. When it is
not given they use the mean of the row's negative `log_q`, which is exact for `uniform`
and an approximation otherwise (callers with a non-uniform sampler should pass it).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from data.errors import RecsysInputError

SampledLoss = Callable[..., Tensor]


def _rows(t: Tensor, n: int) -> Tensor:
    """Broadcast a shared `[m]` tensor to `[n, m]`; `[n, m]` passes through."""
    return t.unsqueeze(0).expand(n, -1) if t.dim() == 1 else t


def _hits(neg_ids: Tensor, positives: Tensor) -> Tensor:
    """Accidental hits `[N, m]`: negatives equal to the row's positive."""
    return _rows(neg_ids, positives.shape[0]) == positives.unsqueeze(1)


def _corrected_softmax_ce(
    pos_logits: Tensor, neg_logits: Tensor, neg_ids: Tensor, log_q: Tensor, positives: Tensor
) -> Tensor:
    """The shared core: subtract log_q from negatives, mask hits, CE with the positive at 0."""
    n = pos_logits.shape[0]
    neg = neg_logits - _rows(log_q, n).to(neg_logits.dtype)
    neg = neg.masked_fill(_hits(neg_ids, positives), torch.finfo(neg.dtype).min)
    logits = torch.cat([pos_logits.unsqueeze(1), neg], dim=1)
    return (torch.logsumexp(logits, dim=1) - pos_logits).mean()


def sampled_softmax(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
) -> Tensor:
    """Sampled softmax with logQ correction; the positive always in the normaliser.

    `loss_i = -s_c + log(exp(s_c) + sum_d exp(s_d - log(m q_d)))`: the importance-sampling
    estimate of the partition function (Barber & Botev eq. 22 with kappa = 1/(m q)),
    which makes the gradient consistent as m grows (rf-softmax Thm 1 with o' = o - log(mq)).
    The positive is not corrected: it is summed exactly, never sampled.

    Args:
        pos_logits: `[N]` positive logits (already / temperature).
        neg_logits: `[N, m]` negative logits.
        neg_ids: `[m]` shared or `[N, m]` per-query item_idx of the negatives.
        log_q: same shape as `neg_ids`, `log(m q_i)`.
        positives: `[N]` item_idx of each positive (for accidental-hit masking).
        pos_log_q: unused (accepted so all sampled losses share one signature).

    Returns:
        Scalar mean cross-entropy.

    """
    return _corrected_softmax_ce(pos_logits, neg_logits, neg_ids, log_q, positives)


def absolute_softmax(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
) -> Tensor:
    """Sampled absolute softmax (Blanc & Rendle 2018 sec. 3.3; rf-softmax sec. 5, QUADRATIC).

    The prediction distribution is `p_i = exp(|o_i|) / sum_j exp(|o_j|)` with
    `o = h.c / tau`, the one a quadratic kernel `alpha o^2 + 1` approximates well (it is
    even in o). Implemented exactly as `sampled_softmax` applied to `|pos_logits|` and
    `|neg_logits|`: take absolute values, subtract `log_q` from the negatives, mask hits,
    cross-entropy with the positive at column 0. Pair it with a sampler whose q tracks
    exp(|o|) (the quadratic kernel) so the correction is small.

    Args: as `sampled_softmax`.

    Returns:
        Scalar mean cross-entropy of the absolute softmax.

    """
    return _corrected_softmax_ce(pos_logits.abs(), neg_logits.abs(), neg_ids, log_q, positives)


def _first_occurrence(ids: Tensor) -> Tensor:
    """Bool `[N, m]` (or `[m]`): True at the first occurrence of each id along the last dim."""
    sorted_ids, order = torch.sort(ids, dim=-1, stable=True)
    first_sorted = torch.ones_like(sorted_ids, dtype=torch.bool)
    first_sorted[..., 1:] = sorted_ids[..., 1:] != sorted_ids[..., :-1]
    return torch.zeros_like(first_sorted).scatter(-1, order, first_sorted)


def bernoulli(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
) -> Tensor:
    """Bernoulli-normalised likelihood (Barber & Botev sec. 2.1.2, eq. 22-23).

    `Z~ = u_c + sum_{d in S} u_d / b_d` where S is a Bernoulli sample of the complementary
    classes (`s_d ~ Bern(b_d)`, no repeats) and `log_q = log b_d`. A Bernoulli sample holds
    each class at most once, so repeated ids are counted once (the first occurrence) and the
    positive is removed (it belongs to C_n, summed exactly). With a true Bernoulli sampler
    this is eq. 22 exactly; fed with-replacement draws it is the same estimator with the
    given `log_q` taken as `log b`.

    Args: as `sampled_softmax`, with `log_q = log(b_i)`.

    Returns:
        Scalar mean of `-(s_c - log Z~)`.

    """
    n = pos_logits.shape[0]
    keep = _rows(_first_occurrence(neg_ids), n) & ~_hits(neg_ids, positives)
    neg = neg_logits - _rows(log_q, n).to(neg_logits.dtype)
    neg = neg.masked_fill(~keep, torch.finfo(neg.dtype).min)
    logits = torch.cat([pos_logits.unsqueeze(1), neg], dim=1)
    return (torch.logsumexp(logits, dim=1) - pos_logits).mean()


def ranking(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
    alpha: float | Tensor | None = None,
) -> Tensor:
    """Log-sigmoid ranking with offset alpha (Barber & Botev eq. 33, 35, 40-42).

    `loss_i = -mean_d log sigma(s_c - s_d - alpha_d)` over the row's non-hit negatives (the
    1/|N_m| of eq. 35). Each term is the single-sample importance estimate of
    `log p(c|x)` (eq. 37-40): with one draw d from q, `sum_{d != c} u_d ~ u_d / q_d`, so
    `alpha_d = -log q_d = log m - log_q_d`. For uniform q over n items this is `log n`,
    the paper's `alpha = log(C - 1)` (their draw excludes the positive, ours masks it).
    Pass `alpha` to override (e.g. 1.0, the hinge-style setting the paper argues against).

    Args: as `sampled_softmax`; `alpha` an optional scalar or `[N, m]` offset.

    Returns:
        Scalar mean over queries.

    """
    n, m = neg_logits.shape
    if alpha is None:
        alpha = math.log(m) - _rows(log_q, n).to(neg_logits.dtype)
    terms = F.logsigmoid(pos_logits.unsqueeze(1) - neg_logits - alpha)
    keep = (~_hits(neg_ids, positives)).to(terms.dtype)
    per_row = (terms * keep).sum(1) / keep.sum(1).clamp_min(1.0)
    return -per_row.mean()


def negative_sampling(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
) -> Tensor:
    """Binary negative sampling (Mikolov et al.; Barber & Botev eq. 43).

    `loss_i = -log sigma(s_c) - sum_d log(1 - sigma(s_d))` over non-hit negatives; no
    q correction (the objective ignores q, which is why its optimum is not the likelihood's).

    Args: as `sampled_softmax` (`log_q` unused).

    Returns:
        Scalar mean over queries.

    """
    keep = (~_hits(neg_ids, positives)).to(neg_logits.dtype)
    neg_terms = (F.logsigmoid(-neg_logits) * keep).sum(1)
    return -(F.logsigmoid(pos_logits) + neg_terms).mean()


def _pos_log_q(log_q: Tensor, n: int, pos_log_q: Tensor | None) -> Tensor:
    """`[N]` log(m q_c) of the positives, or the row mean of the negatives' as a fallback."""
    if pos_log_q is not None:
        return pos_log_q
    return _rows(log_q, n).mean(1)


def nce(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
) -> Tensor:
    """Noise-contrastive estimation with z = 1 (Gutmann & Hyvarinen; Barber & Botev eq. 30-31).

    With k = m noise draws from p_n = q, `k p_n(i) = exp(log_q_i)`, and the model's
    unnormalised `p'(i) = exp(s_i)`, the data/noise classifier has logit `s_i - log_q_i`:
    `loss = -log sigma(s_c - log_q_c) - sum_d log sigma(-(s_d - log_q_d))`, hits dropped.

    Args: as `sampled_softmax`; `pos_log_q [N]` the positive's `log(m q_c)` (see module doc).

    Returns:
        Scalar mean over queries.

    """
    n = pos_logits.shape[0]
    pos = F.logsigmoid(pos_logits - _pos_log_q(log_q, n, pos_log_q).to(pos_logits.dtype))
    neg = F.logsigmoid(-(neg_logits - _rows(log_q, n).to(neg_logits.dtype)))
    keep = (~_hits(neg_ids, positives)).to(neg.dtype)
    return -(pos + (neg * keep).sum(1)).mean()


def blackout(
    pos_logits: Tensor,
    neg_logits: Tensor,
    neg_ids: Tensor,
    log_q: Tensor,
    positives: Tensor,
    *,
    pos_log_q: Tensor | None = None,
) -> Tensor:
    """BlackOut (Ji et al. 2016; Barber & Botev eq. 46-47).

    Weighted softmax over {c} + negatives with weights `1/Q(i)`: `p~_i` is the softmax of
    `s_i - log Q_i` (the `log m` in `log_q` cancels, so `log_q` is used as is), and
    `loss = -log p~_c - sum_d log(1 - p~_d)`; hits are masked out of both.

    Args: as `sampled_softmax`; `pos_log_q [N]` the positive's `log(m q_c)`.

    Returns:
        Scalar mean over queries.

    """
    n = pos_logits.shape[0]
    hits = _hits(neg_ids, positives)
    pos = pos_logits - _pos_log_q(log_q, n, pos_log_q).to(pos_logits.dtype)
    neg = neg_logits - _rows(log_q, n).to(neg_logits.dtype)
    neg = neg.masked_fill(hits, torch.finfo(neg.dtype).min)
    log_p = torch.log_softmax(torch.cat([pos.unsqueeze(1), neg], dim=1), dim=1)
    # log(1 - p) computed stably from log p.
    log_not = torch.log1p(-log_p[:, 1:].exp().clamp(max=1.0 - 1e-7))
    log_not = log_not.masked_fill(hits, 0.0)
    return -(log_p[:, 0] + log_not.sum(1)).mean()


def full_softmax(logits: Tensor, positives: Tensor) -> Tensor:
    """Cross-entropy of the softmax over all items 1..n.

    Args:
        logits: `[N, n + 1]` logits (already / temperature); column 0 is padding, masked.
        positives: `[N]` int64 item_idx.

    Returns:
        Scalar mean cross-entropy.

    """
    masked = logits.clone()
    masked[:, 0] = torch.finfo(logits.dtype).min
    return F.cross_entropy(masked, positives)


SAMPLED_LOSSES: dict[str, SampledLoss] = {
    "sampled_softmax": sampled_softmax,
    "absolute_softmax": absolute_softmax,
    "bernoulli": bernoulli,
    "ranking": ranking,
    "negative_sampling": negative_sampling,
    "nce": nce,
    "blackout": blackout,
}


def get_loss(name: str) -> SampledLoss:
    """The sampled loss called `name`.

    Raises:
        RecsysInputError: unknown name (the message lists the known ones).

    """
    if name not in SAMPLED_LOSSES:
        known = ", ".join(sorted(SAMPLED_LOSSES))
        raise RecsysInputError(f"unknown loss {name!r}; known losses: {known}")
    return SAMPLED_LOSSES[name]
