"""Read and validate a model bundle (`models/<version>/`, layout in `model.bundle.layout`).

The one reader of the files: serving, evaluation and the CLI all load bundles through
`ModelBundle.load` (the manifest through `model.bundle.manifest`). Everything is checked before
anything is used, and every problem is named in the error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from model.bundle.layout import BUNDLE_FILES, ITEM_EMBEDDINGS, ITEMS, QUERY_TOWER
from model.bundle.manifest import BundleError, Manifest, read_manifest

if TYPE_CHECKING:
    from torch import nn

ITEM_COLUMNS = ("item_idx", "item_id", "popularity")
FINITE_CHUNK_ROWS = 65_536  # rows of the embeddings checked for NaN at once ([chunk, d] bools)


@dataclass(frozen=True)
class ModelBundle:
    """One loaded model version, ready for an index and a Recommender.

    Attributes:
        path: The bundle directory.
        manifest: The validated manifest.json (sizes, tower settings, tau, score...).
        item_embeddings: float32 [n + 1, d] (unit rows unless `model.normalize` was false), row
            0 = padding.
        item_ids: [n + 1] external ids by item_idx (entry 0 is "").
        titles: [n + 1] titles by item_idx (None where unknown).
        popularity: int64 [n + 1] training counts by item_idx (0 for padding).
        id_to_idx: item_id -> item_idx.
        query_tower: The torch module with `encode(history [B, L]) -> [B, d]`.

    """

    path: Path
    manifest: Manifest
    item_embeddings: np.ndarray
    item_ids: list[str]
    titles: list[str | None]
    popularity: np.ndarray
    id_to_idx: dict[str, int]
    query_tower: Any

    @property
    def version(self) -> str:
        """The version name: the directory name under models/, which CURRENT names.

        A copied bundle (`cp -r models/v1 models/v1-restore`) is served as its folder's name;
        its manifest keeps the name it was trained as (`manifest.version`, its run's folder).
        """
        return Path(os.path.abspath(self.path)).name  # also for a path given as '.'

    @classmethod
    def load(
        cls, path: Path | str, *, load_tower: bool = True, map_embeddings: bool = False
    ) -> ModelBundle:
        """Load and validate a bundle directory.

        Args:
            path: `models/<version>/`.
            load_tower: Load `query_tower.pt` (False for metadata-only tools).
            map_embeddings: Memory-map `item_embeddings` read-only instead of reading it into
                memory (checks and listings, which never search it).

        Raises:
            BundleError: a file is missing or unreadable, or the files disagree.

        """
        path = Path(path)
        if not path.is_dir():
            raise BundleError(f"{path}: model bundle directory not found")
        for name in BUNDLE_FILES:
            if not (path / name).is_file():
                raise BundleError(f"{path}: bundle file {name} is missing")
        manifest = read_manifest(path)
        emb = _load_embeddings(path / ITEM_EMBEDDINGS, manifest, map_embeddings)
        ids, titles, pop = _load_items(path / ITEMS, manifest.num_items)
        tower = load_query_tower(path, manifest) if load_tower else None
        return cls(
            path=path,
            manifest=manifest,
            item_embeddings=emb,
            item_ids=ids,
            titles=titles,
            popularity=pop,
            id_to_idx={item_id: idx for idx, item_id in enumerate(ids) if idx > 0},
            query_tower=tower,
        )


def _load_embeddings(where: Path, manifest: Manifest, mapped: bool) -> np.ndarray:
    """The checked table float32 [n + 1, d]: in memory, or memory-mapped read-only if `mapped`."""
    try:
        emb = np.load(where, mmap_mode="r" if mapped else None, allow_pickle=False)
    except Exception as err:  # numpy raises EOFError, ValueError, OSError... for a bad file
        raise BundleError(f"{where}: unreadable ({type(err).__name__}: {err})") from None
    if not isinstance(emb, np.ndarray):  # an .npz archive saved under the .npy name
        raise BundleError(f"{where}: not a single array (.npy) but {type(emb).__name__}")
    want = (manifest.num_items + 1, manifest.dim)
    if emb.ndim != 2 or emb.shape != want:
        raise BundleError(f"{where}: shape {emb.shape} does not match the manifest {want}")
    if emb.dtype != np.float32:
        raise BundleError(f"{where}: dtype {emb.dtype}, expected float32")
    if not all_finite(emb):
        raise BundleError(f"{where}: contains NaN or infinite values")
    return emb if mapped else np.ascontiguousarray(emb)


def all_finite(emb: np.ndarray) -> bool:
    """No NaN or infinity in `emb` [rows, d], checked FINITE_CHUNK_ROWS rows at a time."""
    return all(
        bool(np.isfinite(emb[start : start + FINITE_CHUNK_ROWS]).all())
        for start in range(0, len(emb), FINITE_CHUNK_ROWS)
    )


def _load_items(where: Path, num_items: int) -> tuple[list[str], list[str | None], np.ndarray]:
    try:
        items = pl.read_parquet(where)
    except Exception as err:  # polars raises several error types for a bad file
        raise BundleError(f"{where}: unreadable ({err})") from None
    missing = [col for col in ITEM_COLUMNS if col not in items.columns]
    if missing:
        raise BundleError(f"{where}: missing column(s) {', '.join(missing)}")
    items = items.sort("item_idx")
    idx = items["item_idx"].to_numpy()
    if len(idx) != num_items or not np.array_equal(idx, np.arange(1, num_items + 1)):
        raise BundleError(f"{where}: item_idx must be exactly 1..{num_items}")
    ids = [""] + items["item_id"].cast(pl.String).to_list()
    if items["item_id"].n_unique() != num_items:
        raise BundleError(f"{where}: item_id values are not unique")
    titles: list[str | None] = [None] * (num_items + 1)
    if "title" in items.columns:
        titles = [None] + items["title"].cast(pl.String).to_list()
    pop = np.zeros(num_items + 1, dtype=np.int64)
    pop[1:] = items["popularity"].fill_null(0).to_numpy()
    return ids, titles, pop


def load_query_tower(path: Path, manifest: Manifest) -> nn.Module:
    """Rebuild the bundle's query tower in eval mode on CPU (no checkpoint needed).

    Raises:
        BundleError: the file is missing, truncated or does not fit the manifest.

    """
    import torch  # here, not at the top: listing and validating bundles start without torch

    from model.build import build_query_tower

    where = path / QUERY_TOWER
    try:
        tower = build_query_tower(manifest.model, manifest.num_items)
        tower.load_state_dict(torch.load(where, map_location="cpu", weights_only=True))
    except Exception as err:  # torch/pickle raise many types for a corrupt or mismatched file
        raise BundleError(f"{where}: cannot load the query tower ({err})") from None
    bad = nonfinite_weights(tower)  # a NaN tower ranks nothing at all
    if bad:
        raise BundleError(f"{where}: {bad[0]} holds NaN or infinite weights")
    _check_width(tower.eval(), where, manifest.dim)
    return tower


def nonfinite_weights(tower: nn.Module) -> list[str]:
    """Names of the tower's floating-point weights holding a NaN or an infinity."""
    import torch

    return [
        name
        for name, weight in tower.state_dict().items()
        if weight.is_floating_point() and not bool(torch.isfinite(weight).all())
    ]


def _check_width(tower: Any, where: Path, dim: int) -> None:
    """Refuse a tower whose queries [B, w] cannot be searched among item embeddings [n + 1, dim].

    Raises:
        BundleError: w != dim, or the tower cannot encode a one-item history [1, 1].

    """
    import torch

    try:
        with torch.inference_mode():
            width = int(tower.encode(torch.ones((1, 1), dtype=torch.int64)).shape[-1])
    except Exception as err:  # a tower that loads but cannot run serves nothing either
        raise BundleError(f"{where}: the query tower cannot encode a history ({err})") from None
    if width != dim:
        raise BundleError(
            f"{where}: the query tower's output width {width} does not match the "
            f"manifest's dim {dim} (the item embeddings' width)"
        )
