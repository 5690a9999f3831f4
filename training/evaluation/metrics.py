"""Full-ranking evaluation over ALL items (never sampled metrics), chunked over the catalogue.

Protocol (documented choices):
- Rank of a target = number of items in 1..n, other than the target and not excluded,
  whose score is strictly higher, plus those that tie with it (ties are counted
  pessimistically, so a constant-score model ranks every target last, not first).
  Rank 0 is the top.
- `exclude` (the user's history, as in the S3-Rec protocol behind the published Beauty
  numbers) removes items from the competition, but never the target itself: when the
  target is also in the history (a repeat) it is still ranked.
- `full_ce` is the cross-entropy of the full softmax over items 1..n (nothing masked), at
  the model's temperature, computed with a running logsumexp over item chunks.
- `absolute=True` scores |h . c| instead of h . c, for both the ranks and `full_ce`: the
  prediction distribution of a model trained with the absolute softmax.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from training.precision import EXP_FLOOR

Exclude = Tensor | Sequence[Tensor] | None
UNRANKED = torch.iinfo(torch.int64).max  # the rank of a target with no score: below every cut-off


def _pad_exclude(exclude: Exclude, num_rows: int, device: torch.device) -> Tensor:
    """`[U, L]` int64 item_idx to exclude (0 = pad) from a list or a padded tensor."""
    if exclude is None:
        return torch.zeros(num_rows, 0, dtype=torch.int64, device=device)
    if isinstance(exclude, Tensor):
        return exclude.to(device=device, dtype=torch.int64).reshape(num_rows, -1)
    if len(exclude) != num_rows:
        raise ValueError(f"exclude has {len(exclude)} rows, expected {num_rows}")
    width = max((int(e.numel()) for e in exclude), default=0)
    out = torch.zeros(num_rows, width, dtype=torch.int64, device=device)
    for row, items in enumerate(exclude):
        out[row, : items.numel()] = items.reshape(-1).to(device=device, dtype=torch.int64)
    return out


def _uncounted(excl: Tensor, targets: Tensor) -> Tensor:
    """`[U, L + 1]` the items that never compete with a row's target, each once.

    Its excluded items and the target itself; 0 = none, and a repeat of an earlier entry
    becomes 0.
    """
    ids = torch.cat([targets.unsqueeze(1), excl], dim=1).sort(dim=1).values
    repeat = torch.zeros_like(ids, dtype=torch.bool)
    repeat[:, 1:] = ids[:, 1:] == ids[:, :-1]
    return ids.masked_fill(repeat, 0)


def _counted_above(scores: Tensor, target_score: Tensor, skip: Tensor, start: int) -> Tensor:
    """`[U]` items of the chunk `scores [c, U]` (items start.., a user a column) at or above target.

    The `skip [U, S]` items (`_uncounted`) that fall in the chunk do not count: they are
    gathered from the same scores, so they are uncounted exactly as they were counted, and
    no `[c, U]` mask is built.
    """
    # int32 sums: summing bools into int64 first copies the whole [c, U] mask (6x slower)
    above = (scores >= target_score).sum(0, dtype=torch.int32)
    column = skip - start
    inside = (skip != 0) & (column >= 0) & (column < scores.shape[0])
    theirs = scores.gather(0, column.clamp(0, scores.shape[0] - 1).T).T  # [U, S]
    return above - ((theirs >= target_score.unsqueeze(1)) & inside).sum(1, dtype=torch.int32)


@torch.no_grad()
def rank_targets(
    queries: Tensor,
    item_emb: Tensor,
    targets: Tensor,
    temperature: float = 1.0,
    exclude: Exclude = None,
    item_chunk: int = 65536,
    absolute: bool = False,
) -> tuple[Tensor, Tensor]:
    """Full-catalogue rank and log-softmax of each target, chunk by chunk over items.

    Args:
        queries: `[U, d]` query embeddings.
        item_emb: `[n + 1, d]` item table; row 0 is padding and never ranked.
        targets: `[U]` int64 item_idx in 1..n.
        temperature: logit = h . c / temperature (affects `log_p` only, not ranks).
        exclude: per-user item_idx never counted above the target: a list of `[L_u]`
            tensors, a padded `[U, L]` tensor (0 = pad), or None. The target is never excluded.
        item_chunk: items scored at once; memory is O(U * item_chunk).
        absolute: score |h . c| (absolute-softmax models) instead of h . c.

    Returns:
        `(ranks [U] int64, log_p [U] float32)`: pessimistic 0-based rank among the
        non-excluded items (`UNRANKED` for a NaN target score: a miss at every cut-off), and
        the log-softmax of the target over all items 1..n.

    """
    queries = queries.to(torch.float32)
    targets = targets.to(device=queries.device, dtype=torch.int64)
    skip = _uncounted(_pad_exclude(exclude, queries.shape[0], queries.device), targets)
    target_score = (queries * item_emb[targets].to(queries)).sum(1)  # [U]
    if absolute:
        target_score = target_score.abs()
    above = torch.zeros_like(targets)
    run_max = torch.full_like(target_score, -torch.inf)
    run_sum = torch.zeros_like(target_score)
    n = item_emb.shape[0] - 1
    for start in range(1, n + 1, item_chunk):
        rows = item_emb[start : min(start + item_chunk, n + 1)].to(queries)
        scores = rows @ queries.T  # [c, U]: this product runs faster than queries @ rows.T
        if absolute:
            scores.abs_()
        above += _counted_above(scores, target_score, skip, start)
        logits = scores.div_(temperature)  # in place from here on: [c, U] passes, no copies
        new_max = torch.maximum(run_max, logits.amax(0))
        run_sum = run_sum * torch.exp(run_max - new_max)
        run_sum += logits.sub_(new_max).clamp_(min=EXP_FLOOR).exp_().sum(0)
        run_max = new_max
    log_p = target_score / temperature - (run_max + torch.log(run_sum))
    # a NaN score (a diverged model) compares False with everything: it would rank first
    above = torch.where(torch.isnan(target_score), UNRANKED, above)
    return above, log_p


def ndcg_per_user(ranks: Tensor, k: int) -> Tensor:
    """`[U]` float64 NDCG@k of one relevant item per user from 0-based `ranks [U]`."""
    r = ranks.to(torch.float64)
    return torch.where(r < k, 1.0 / torch.log2(r + 2.0), 0.0)


def ranking_metrics(
    ranks: Tensor, log_p: Tensor, ks: Sequence[int] = (10, 20, 100)
) -> dict[str, float]:
    """Recall@K, NDCG@K, MRR@K (one relevant item per user) and the full cross-entropy.

    Args:
        ranks: `[U]` 0-based ranks from `rank_targets`.
        log_p: `[U]` log-softmax of the targets.
        ks: cut-offs.

    Returns:
        `{"recall@K", "ndcg@K", "mrr@K" for each K, "full_ce"}`, means over users.

    """
    r = ranks.to(torch.float64)
    out: dict[str, float] = {}
    for k in ks:
        hit = r < k
        out[f"recall@{k}"] = float(hit.double().mean())
        out[f"ndcg@{k}"] = float(ndcg_per_user(ranks, k).mean())
        out[f"mrr@{k}"] = float(torch.where(hit, 1.0 / (r + 1.0), 0.0).mean())
    out["full_ce"] = float(-log_p.to(torch.float64).mean())
    return out


def all_missed(ks: Sequence[int] = (10, 20, 100)) -> dict[str, float]:
    """`ranking_metrics`' ranking figures for users whose targets all ranked nowhere: zeros.

    No full cross-entropy: a target the model cannot score has no log-probability.
    """
    missed = ranking_metrics(torch.tensor([UNRANKED]), torch.zeros(1), ks)
    return {name: value for name, value in missed.items() if name != "full_ce"}


def popularity_baseline(
    item_counts: Tensor,
    targets: Tensor,
    exclude: Exclude = None,
    ks: Sequence[int] = (10, 20, 100),
) -> dict[str, float]:
    """Ranking metrics of recommending by training popularity (the bar a model must beat).

    Args:
        item_counts: `[n + 1]` interaction counts (index 0 ignored).
        targets: `[U]` item_idx.
        exclude: as in `rank_targets`.
        ks: cut-offs.

    Returns:
        `recall@K`, `ndcg@K`, `mrr@K` (no `full_ce`: popularity is not a softmax model).

    """
    scores = item_counts.to(torch.float32).reshape(-1, 1)
    queries = torch.ones(targets.shape[0], 1)
    ranks, log_p = rank_targets(queries, scores, targets, 1.0, exclude)
    metrics = ranking_metrics(ranks, log_p, ks)
    metrics.pop("full_ce")
    return metrics
