"""The bundles `bench serving` and `bench events` serve: random towers over synthetic tables.

A bundle's query tower is the default one with random weights (latency does not depend on the
weights); its item table holds random unit rows, or rows like a trained table's.

An approximate index's recall depends on the geometry of the table it searches. Random unit
vectors in d = 256 are the hardest case there is (every point nearly as far as every other);
a trained table has a mean direction and a fast-falling spectrum. `TrainedLaw` draws n rows
from the Gaussian with a trained bundle's mean and covariance, so the table keeps the trained
one's spectrum at any catalogue size, and recall queries come from the same law (the rows an
item-to-item query would search from; the service measures with item rows too when it has no
user histories). A cosine model's table (the default) holds unit rows: its draws are put on the
unit sphere too, since an inner-product index over unit rows is another search than one over
rows of many lengths.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from model.bundle.layout import ITEM_EMBEDDINGS

FIT_ROWS = 200_000  # rows of the trained table the mean and covariance are taken from
BLOCK = 100_000  # rows drawn at a time


def random_unit(rows: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """`[rows, dim]` float32 rows uniform on the unit sphere."""
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    return table


def trained_table(path: Path) -> np.ndarray:
    """The item rows (padding row 0 left out) of a bundle's folder or of an `.npy` table.

    Raises:
        RecsysInputError: neither a bundle nor a 2-d `.npy` table.

    """
    from data.errors import RecsysInputError

    file = path / ITEM_EMBEDDINGS if path.is_dir() else path
    try:
        table = np.load(file, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise RecsysInputError(
            f"--like {path}: not a bundle or an .npy item table ({err})"
        ) from None
    if table.ndim != 2 or len(table) < 3:
        raise RecsysInputError(f"--like {path}: expected an [n + 1, d] table, got {table.shape}")
    return np.asarray(table[1:], dtype=np.float32)


class TrainedLaw:
    """The Gaussian of a trained table's item rows (their mean and covariance).

    Its draws are put on the unit sphere when the trained rows are unit rows (the cosine
    model's table, the default).
    """

    def __init__(self, rows: np.ndarray, rng: np.random.Generator) -> None:
        """Fit to up to FIT_ROWS of the item rows `rows [n, d]`."""
        self.rows = len(rows)
        if len(rows) > FIT_ROWS:
            rows = rows[rng.choice(len(rows), FIT_ROWS, replace=False)]
        rows = rows.astype(np.float64)
        self.unit = bool(np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-3))
        self.mean = rows.mean(axis=0)
        cov = np.cov(rows, rowvar=False)
        values, vectors = np.linalg.eigh(cov)
        self.spectrum = np.clip(values, 0.0, None)[::-1]
        self.factor = vectors * np.sqrt(np.clip(values, 0.0, None))  # cov = factor factor^T
        self.dim = rows.shape[1]

    def draw(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """`[rows, d]` float32 rows of the law."""
        out = np.empty((rows, self.dim), dtype=np.float32)
        for first in range(0, rows, BLOCK):
            size = min(BLOCK, rows - first)
            z = rng.standard_normal((size, self.dim))
            out[first : first + size] = self.mean + z @ self.factor.T
        if self.unit:
            out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def fingerprint(self) -> str:
        """12 hex digits naming the law (a bundle drawn from another law is another bundle)."""
        import hashlib

        law = self.mean.tobytes() + self.factor.tobytes() + (b"unit" if self.unit else b"")
        return hashlib.sha256(law).hexdigest()[:12]

    def summary(self) -> dict[str, Any]:
        """What a record says of the law: the trained rows, the 90% rank, unit rows or not."""
        return {"rows": self.rows, "rank_90": self.effective_rank(), "unit_rows": self.unit}

    def effective_rank(self, share: float = 0.9) -> int:
        """How many principal directions hold `share` of the variance."""
        cumulative = np.cumsum(self.spectrum) / max(self.spectrum.sum(), 1e-30)
        return int(np.searchsorted(cumulative, share) + 1)


def synthetic_bundle(
    home: Path, num_items: int, dim: int, seed: int, item_prefix: str = "",
    table: Callable[[], np.ndarray] | None = None, table_name: str = "random",
) -> Path:  # fmt: skip
    """Publish a bundle of the rows `table()` draws (default: random unit rows), random tower.

    Item ids are `item_prefix` + "1".."N"; the version names the size, width and table, so a
    bundle (and its cached index) is reused by the run that asks for the same, and its rows are
    not drawn again.
    """
    from model.bundle import publish

    version = f"bench-{num_items}" if dim == 64 else f"bench-{num_items}-d{dim}"
    version += "" if table_name == "random" else f"-{table_name}"
    models = home / "models"
    if not (models / version).is_dir():
        rng = np.random.default_rng(seed)
        rows = random_unit(num_items, dim, rng) if table is None else table()
        _write(models, version, rows, _items(num_items, item_prefix, rng), seed, table_name)
    publish(models, version)
    return models / version


def _write(
    models: Path, version: str, rows: np.ndarray, items: Any, seed: int, table_name: str
) -> None:
    """Write bundle `version` of item `rows [n, d]` and a tower with random weights.

    The tower is the one the committed serving records were measured with (`sasrec`, L = 20,
    cosine logits: the defaults then), so a cached bundle and a new one serve alike.
    """
    from datetime import UTC, datetime

    import torch

    from model.build import build_query_tower
    from model.bundle import Manifest, write_bundle
    from model.config import ModelConfig

    num_items, dim = rows.shape
    torch.manual_seed(seed)
    cfg = ModelConfig(tower="sasrec", dim=dim, max_len=20, normalize=True, temperature=0.1)
    tower = build_query_tower(cfg, num_items).eval()
    manifest = Manifest(
        version=version, created_at=datetime.now(UTC), dataset=f"synthetic-{table_name}",
        num_items=num_items, model=cfg, temperature=cfg.temperature,
    )  # fmt: skip
    emb = np.concatenate([np.zeros((1, dim), dtype=np.float32), rows])
    write_bundle(models, manifest, query_tower=tower, item_embeddings=emb, items=items)


def _items(num_items: int, item_prefix: str, rng: np.random.Generator) -> Any:
    """The bundle's item list: ids `item_prefix` + "1".."N", Zipf popularity."""
    import polars as pl

    return pl.DataFrame(
        {
            "item_idx": np.arange(1, num_items + 1, dtype=np.int64),
            "item_id": item_prefix + pl.int_range(1, num_items + 1, eager=True).cast(pl.String),
            "popularity": rng.zipf(1.5, num_items).astype(np.int64),
        }
    )
