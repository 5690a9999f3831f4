"""The sampled losses: their families over corrected logits (the full softmax: full_softmax.py).

A sampled loss is a `SampledLoss`: the correction steps it takes (`training/corrections.py`:
magnitude, temperature, log q, accidental hits, user items, repeats, always in that order) and
a family that sees only the corrected `Logits` and returns the mean over the N queries. Adding
a loss is one entry in `SAMPLED_LOSSES`; adding a sampler touches no loss.

`log_q` is the sampler's truth about its draw (DESIGN.md): the log of the expected number of
times each id appears (`log(m q_i)` for m draws with replacement, `log(b_i)` for Bernoulli
inclusion), and `pos_log_q` the same for each positive under the sampler's own proposal.
Accidental hits are masked, never resampled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from data.errors import RecsysInputError
from training.corrections import Batch, Logits, correct
from training.samplers.base import Negatives

CORRECTED = frozenset({"temperature", "log_q", "accidental_hits", "user_items"})
UNCORRECTED = frozenset({"temperature", "accidental_hits", "user_items"})
# NCE's noise ranges over every class, the true one included (Barber & Botev sec. 3.2, eq. 30):
# dropping a noise draw that hits the positive weighs class c's noise term by 1 - p_c and moves
# the optimum from exp(s_c) = p_c to p_c / (1 - p_c), losing the self-normalisation
NOISE_OVER_ALL = CORRECTED - {"accidental_hits"}


def softmax_ce(logits: Logits) -> Tensor:
    """Cross-entropy with the positive at column 0 over `[pos, neg]`.

    With the log-q step this is the sampled softmax: `-s_c + log(e^s_c + sum_d e^(s_d -
    log(m q_d)))`, the importance-sampling estimate of the partition function (Barber &
    Botev eq. 22 with kappa = 1 / (m q)), consistent as m grows (rf-softmax Thm 1). With the
    `repeats` step and `log_q = log b` it is the Bernoulli-normalised likelihood (eq. 22-23):
    `Z~ = u_c + sum_{d in S} u_d / b_d` over the sample as a set, the positive summed exactly.
    """
    both = torch.cat([logits.pos.unsqueeze(1), logits.neg], dim=1)
    return (torch.logsumexp(both, dim=1) - logits.pos).mean()


def ranking_family(alpha: float | None = None) -> Callable[[Logits], Tensor]:
    """Log-sigmoid ranking with offset alpha (Barber & Botev eq. 33, 35, 40-42).

    `loss_i = -mean_d log sigma(s_c - s_d - alpha_d)` over the row's kept negatives (the
    1/|N_m| of eq. 35). Each term is the single-draw importance estimate of `log p(c|x)`
    (eq. 37-40): one draw d from q gives `sum_{d != c} u_d ~ u_d / q_d`, so `alpha_d =
    -log q_d`. On log-q-corrected logits `s_d - log(m q_d)` that is an offset of `log m`,
    m the row's width; for uniform q over n items alpha = log n, the paper's log(C - 1).
    `alpha` given: that fixed offset on uncorrected logits (e.g. 1, the hinge-style setting
    the paper argues against).
    """

    def ranking(logits: Logits) -> Tensor:
        width = max(logits.neg.shape[1], 1)  # an empty draw: no terms, a loss of 0
        offset = math.log(width) if alpha is None else alpha
        terms = F.logsigmoid(logits.pos.unsqueeze(1) - logits.neg - offset)
        keep = logits.keep.to(terms.dtype)
        per_row = (terms * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return -per_row.mean()

    return ranking


def negative_sampling_family(logits: Logits) -> Tensor:
    """Binary negative sampling (Mikolov et al.; Barber & Botev eq. 43), on uncorrected logits.

    `loss_i = -log sigma(s_c) - sum_d log(1 - sigma(s_d))` over kept negatives: the objective
    ignores q, which is why its optimum is not the likelihood's.
    """
    keep = logits.keep.to(logits.neg.dtype)
    return -(F.logsigmoid(logits.pos) + (F.logsigmoid(-logits.neg) * keep).sum(1)).mean()


def nce_family(logits: Logits) -> Tensor:
    """Noise-contrastive estimation with z = 1 (Gutmann & Hyvarinen; Barber & Botev eq. 30-31).

    With k = m noise draws from q (`k q(i) = exp(log_q_i)`) and the model's unnormalised
    `exp(s_i)`, the data/noise classifier's logit is `s_i - log_q_i`, for the positive too:
    `loss = -log sigma(s_c - log_q_c) - sum_d log sigma(-(s_d - log_q_d))` over every draw,
    a draw of the positive itself included (`NOISE_OVER_ALL`).
    """
    keep = logits.keep.to(logits.neg.dtype)
    pos = F.logsigmoid(logits.pos - logits.pos_log_q)
    return -(pos + (F.logsigmoid(-logits.neg) * keep).sum(1)).mean()


def blackout_family(logits: Logits) -> Tensor:
    """BlackOut (Ji et al. 2016; Barber & Botev eq. 46-47).

    Weighted softmax over {c} + negatives with weights `1/Q(i)`: `p~_i` is the softmax of
    `s_i - log Q_i`, the positive by its own `log_q_c` (the `log m` in `log_q` cancels), and
    `loss = -log p~_c - sum_d log(1 - p~_d)` over kept negatives.
    """
    both = torch.cat([(logits.pos - logits.pos_log_q).unsqueeze(1), logits.neg], dim=1)
    log_p = torch.log_softmax(both, dim=1)
    # log(1 - p) computed stably from log p.
    log_not = torch.log1p(-log_p[:, 1:].exp().clamp(max=1.0 - 1e-7))
    log_not = log_not.masked_fill(~logits.keep, 0.0)
    return -(log_p[:, 0] + log_not.sum(1)).mean()


@dataclass(frozen=True)
class SampledLoss:
    """A loss family and the correction steps it takes (see `training/corrections.py`)."""

    family: Callable[[Logits], Tensor]
    steps: frozenset[str]

    def __call__(
        self,
        pos_scores: Tensor,
        neg_scores: Tensor,
        negatives: Negatives,
        positives: Tensor,
        temperature: float,
        user_items: Tensor | None = None,
    ) -> Tensor:
        """Scalar mean loss of raw scores `pos_scores [N]` (h . c) and `neg_scores [N, m]`.

        Args:
            pos_scores: `[N]` h . c of each positive.
            neg_scores: `[N, m]` h . c of each negative (`negatives.ids`, shared or per row).
            negatives: The sampler's draw.
            positives: `[N]` item_idx of each positive.
            temperature: The model's tau.
            user_items: `[N, W]` each query's window items, never its negatives (None: any).

        """
        batch = Batch(negatives, positives, temperature, user_items)
        return self.family(correct(pos_scores, neg_scores, batch, self.steps))


SAMPLED_LOSSES: dict[str, SampledLoss] = {
    "sampled_softmax": SampledLoss(softmax_ce, CORRECTED),
    # softmax(|o|), Blanc & Rendle sec. 3.3: pair with the quadratic kernel, even in o.
    "absolute_softmax": SampledLoss(softmax_ce, CORRECTED | {"magnitude"}),
    "bernoulli": SampledLoss(softmax_ce, CORRECTED | {"repeats"}),
    "ranking": SampledLoss(ranking_family(), CORRECTED),
    "negative_sampling": SampledLoss(negative_sampling_family, UNCORRECTED),
    "nce": SampledLoss(nce_family, NOISE_OVER_ALL),
    "blackout": SampledLoss(blackout_family, CORRECTED),
}


BINARY_LOSSES = ("negative_sampling", "nce")
BINARY_MAX_NEGATIVES = 8


def binary_loss_caveat(name: str, per_query: bool, num_negatives: int) -> str | None:
    """Why a binary loss with these negatives is likely to rank at chance (None: no caveat).

    Measured (docs/benchmarks/sampler-comparison.md): negative sampling and NCE do not learn
    with negatives shared by the batch, nor with many drawn per query, in this model; negative
    sampling learns per query with m <= 8, NCE did not learn in any setting tried.
    """
    if name not in BINARY_LOSSES:
        return None
    if name == "negative_sampling" and per_query and num_negatives <= BINARY_MAX_NEGATIVES:
        return None
    shape = "per-query" if per_query else "shared"
    advice = (
        f"use sampler.per_query=true with num_negatives <= {BINARY_MAX_NEGATIVES}, or "
        if name == "negative_sampling"
        else "use "
    )
    return (
        f"loss {name} with {num_negatives} {shape} negatives ranked at chance in this model's "
        f"measurements (docs/benchmarks/sampler-comparison.md): {advice}a softmax-family loss"
    )


def get_loss(name: str) -> SampledLoss:
    """The sampled loss called `name`.

    Raises:
        RecsysInputError: unknown name (the message lists the known ones).

    """
    if name not in SAMPLED_LOSSES:
        known = ", ".join(sorted(SAMPLED_LOSSES))
        raise RecsysInputError(f"unknown loss {name!r}; known losses: {known}")
    return SAMPLED_LOSSES[name]
