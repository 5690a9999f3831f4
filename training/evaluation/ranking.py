"""Full-ranking evaluation: every target ranked against the whole catalogue, seen items masked.

`rank_batch` ranks one batch of eval examples, `rank_loader` a whole loader (ranks in split
order), `evaluate_loader` turns a loader into Recall/NDCG/MRR@K and full CE. The training
module's validation rounds, the pipeline's final metrics and the benchmarks all use these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from training.config import RecsysConfig


@torch.no_grad()
def rank_batch(
    query_tower: torch.nn.Module,
    item_emb: Tensor,
    batch: dict[str, Tensor],
    temperature: float,
    exclude_seen: bool,
    item_chunk: int,
    absolute: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Full-ranking ranks of one eval batch.

    Args:
        query_tower: Has `encode(history [B, L]) -> [B, d]`.
        item_emb: `[n + 1, d]` item table as the item tower gives it (row 0 zeros), on the
            batch's device.
        batch: history `[B, L]`, target `[B]`, seen `[B, H]` from `EvalExamples`.
        temperature: Softmax temperature.
        exclude_seen: Mask the user's history items when ranking.
        item_chunk: Items scored at once.
        absolute: Rank by |h . c| (`RecsysConfig.ranks_by_magnitude`).

    Returns:
        (ranks `[B]`, log_p `[B]`, queries `[B, d]`).

    """
    from training.evaluation.metrics import rank_targets

    encode: Callable[[Tensor], Tensor] = getattr(query_tower, "encode")  # noqa: B009
    queries = encode(batch["history"])
    exclude = batch["seen"] if exclude_seen else None
    ranks, log_p = rank_targets(
        queries, item_emb, batch["target"], temperature, exclude, item_chunk, absolute
    )
    return ranks, log_p, queries


@torch.no_grad()
def rank_loader(
    query_tower: torch.nn.Module,
    item_emb: Tensor,
    loader: Iterable[dict[str, Tensor]],
    temperature: float,
    cfg: RecsysConfig,
    device: torch.device | str = "cpu",
    *,
    absolute: bool,
) -> tuple[Tensor, Tensor]:
    """Full-ranking ranks `[U]` and target log-probabilities `[U]` in the split's order (CPU).

    `absolute` ranks by |h . c|: the config's `ranks_by_magnitude` while training, the
    bundle manifest's `score` when evaluating a published model.
    """
    query_tower = query_tower.to(device).eval()
    item_emb = item_emb.to(device)
    ranks, log_ps, rows = [], [], []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        r, lp, _ = rank_batch(
            query_tower, item_emb, batch, temperature, cfg.eval.exclude_seen,
            cfg.eval.item_chunk, absolute,
        )  # fmt: skip
        ranks.append(r.cpu())
        log_ps.append(lp.cpu())
        rows.append(batch["row"].cpu())
    order = torch.cat(rows).argsort()  # the loader batches by length; back to split order
    return torch.cat(ranks)[order], torch.cat(log_ps)[order]


def evaluate_loader(
    query_tower: torch.nn.Module,
    item_emb: Tensor,
    loader: Iterable[dict[str, Tensor]],
    temperature: float,
    cfg: RecsysConfig,
    device: torch.device | str = "cpu",
    *,
    absolute: bool,
) -> dict[str, float]:
    """Full-ranking metrics (recall/ndcg/mrr@K, full_ce) of a tower over an eval loader."""
    from training.evaluation.metrics import ranking_metrics

    ranks, log_p = rank_loader(
        query_tower, item_emb, loader, temperature, cfg, device, absolute=absolute
    )
    metrics = ranking_metrics(ranks, log_p, cfg.eval.ks)
    return {k: float(v) for k, v in metrics.items()}
