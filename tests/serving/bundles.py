"""Planted model bundles for the serving tests: a real query tower whose best item is known.

The query tower has random weights; the item table is random too, except that the embedding
of a chosen `target` item is set to the tower's query vector for `PLANTED_HISTORY`, so that
item is the unique top-1 (inner product 1.0) for that history.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import torch

from model.build import build_query_tower
from model.bundle import Manifest, publish, write_bundle
from model.config import ModelConfig

MODEL_CFG = ModelConfig(
    tower="sasrec", dim=16, max_len=8, num_layers=1, num_heads=1, dropout=0.0, normalize=True
)  # unit rows: the planted item's cosine score is 1
PLANTED_HISTORY = ["i1", "i2", "i3"]
POPULAR = ["i7", "i5", "i9"]  # the three most popular items, in order


def item_id(idx: int, prefix: str = "i") -> str:
    """External id of item_idx `idx`."""
    return f"{prefix}{idx}"


def make_bundle(
    models_dir: Path,
    version: str,
    *,
    num_items: int = 60,
    target: int = 40,
    seed: int = 0,
    publish_it: bool = True,
    score: str = "dot",
    id_prefix: str = "i",
) -> Path:
    """Write (and by default publish) a planted bundle; `target` is top-1 for PLANTED_HISTORY.

    With `score="abs_dot"` (an absolute-softmax model) the target is planted anti-aligned,
    h . c = -1: top-1 by |h . c| and last by h . c.
    """
    torch.manual_seed(seed)
    tower = build_query_tower(MODEL_CFG, num_items).eval()
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(num_items + 1, MODEL_CFG.dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb[0] = 0.0
    hist = torch.tensor([[0] * 5 + [1, 2, 3]])
    with torch.inference_mode():
        query = tower.encode(hist)[0].numpy()
    emb[target] = query / np.linalg.norm(query) * (-1.0 if score == "abs_dot" else 1.0)
    pop = np.arange(num_items, 0, -1, dtype=np.int64)  # item 1 most popular by default...
    pop[[6, 4, 8]] = [10_000, 9_000, 8_000]  # ...except the planted POPULAR items
    items = pl.DataFrame(
        {
            "item_idx": np.arange(1, num_items + 1, dtype=np.int64),
            "item_id": [item_id(i, id_prefix) for i in range(1, num_items + 1)],
            "popularity": pop,
            "title": [f"Title {i}" if i % 2 == 0 else None for i in range(1, num_items + 1)],
        }
    )
    manifest = Manifest(
        version=version,
        created_at=datetime.now(UTC),
        dataset="planted",
        num_items=num_items,
        model=MODEL_CFG,
        temperature=0.05,
        score=score,
        metrics={"test": {"ndcg@10": 0.5}},
    )
    path = write_bundle(models_dir, manifest, query_tower=tower, item_embeddings=emb, items=items)
    if publish_it:
        publish(models_dir, version)
    return path
