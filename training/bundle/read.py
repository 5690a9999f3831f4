"""Load and validate a published model bundle (`models/<version>/`) for serving.

A bundle is the training side's export (see `training/export.py` and docs/architecture.md):
`manifest.json`, `item_embeddings.npy` (float32 [n + 1, d], row 0 = padding zeros),
`query_tower.pt` and `items.parquet` (item_idx, item_id, popularity, title). Everything is
checked here, before anything is served, and every problem is named in the error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from data.errors import RecsysInputError
from data.workspace import Workspace

READABLE_FORMATS = (1, 2)  # format 2 added "score"; format 1 bundles rank by h . c
MANIFEST_KEYS = ("format_version", "version", "num_items", "dim", "model")
BUNDLE_FILES = ("manifest.json", "item_embeddings.npy", "query_tower.pt", "items.parquet")
ITEM_COLUMNS = ("item_idx", "item_id", "popularity")
SCORES = ("dot", "abs_dot")  # manifest "score": rank by h . c, or by |h . c| (absolute softmax)


class BundleError(RecsysInputError):
    """A bundle is missing, incomplete or inconsistent; the message names the file and problem."""


@dataclass(frozen=True)
class ModelBundle:
    """One loaded model version, ready for an index and a Recommender.

    Attributes:
        path: The bundle directory.
        manifest: The parsed manifest.json.
        item_embeddings: float32 [n + 1, d], L2-normalised rows, row 0 = padding.
        item_ids: [n + 1] external ids by item_idx (entry 0 is "").
        titles: [n + 1] titles by item_idx (None where unknown).
        popularity: int64 [n + 1] training counts by item_idx (0 for padding).
        id_to_idx: item_id -> item_idx.
        query_tower: The torch module with `encode(history [B, L]) -> [B, d]`.

    """

    path: Path
    manifest: dict[str, Any]
    item_embeddings: np.ndarray
    item_ids: list[str]
    titles: list[str | None]
    popularity: np.ndarray
    id_to_idx: dict[str, int]
    query_tower: Any

    @property
    def version(self) -> str:
        """The version name (the directory name under models/)."""
        return str(self.manifest["version"])

    @property
    def ranks_by_magnitude(self) -> bool:
        """The model ranks items by |h . c| (trained with the absolute softmax), not h . c."""
        return self.manifest.get("score", "dot") == "abs_dot"

    @property
    def num_items(self) -> int:
        """Number of real items n (item_idx runs 1..n)."""
        return int(self.manifest["num_items"])

    @property
    def dim(self) -> int:
        """Embedding dimension d."""
        return int(self.manifest["dim"])

    @property
    def max_len(self) -> int:
        """History length L the query tower takes."""
        return int(self.manifest["model"].get("max_len", 50))

    @classmethod
    def load(cls, path: Path | str, *, load_tower: bool = True) -> ModelBundle:
        """Load and validate a bundle directory.

        Args:
            path: `models/<version>/`.
            load_tower: Load `query_tower.pt` (False for metadata-only tools).

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
        emb = _load_embeddings(path / "item_embeddings.npy", manifest)
        ids, titles, pop = _load_items(path / "items.parquet", int(manifest["num_items"]))
        tower = _load_tower(path, manifest) if load_tower else None
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


def read_manifest(path: Path) -> dict[str, Any]:
    """Parse and check `manifest.json` of a bundle directory.

    Raises:
        BundleError: unreadable JSON, a missing key, a wrong format_version or bad sizes.

    """
    where = path / "manifest.json"
    try:
        manifest = json.loads(where.read_text())
    except FileNotFoundError:
        raise BundleError(f"{where}: not found") from None
    except (OSError, ValueError) as err:
        raise BundleError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{where}: must be a JSON object")
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise BundleError(f"{where}: missing key(s) {', '.join(missing)}")
    if manifest["format_version"] not in READABLE_FORMATS:
        raise BundleError(
            f"{where}: format_version {manifest['format_version']!r} is not supported "
            f"(this version reads {', '.join(map(str, READABLE_FORMATS))})"
        )
    for key in ("num_items", "dim"):
        if not isinstance(manifest[key], int) or manifest[key] < 1:
            raise BundleError(f"{where}: {key} must be a positive integer")
    if not isinstance(manifest["model"], dict):
        raise BundleError(f"{where}: model must be an object (the query tower's kwargs)")
    if manifest.get("score", "dot") not in SCORES:
        raise BundleError(f"{where}: score must be one of {', '.join(SCORES)}")
    return manifest


def _load_embeddings(where: Path, manifest: dict[str, Any]) -> np.ndarray:
    try:
        emb = np.load(where, allow_pickle=False)
    except Exception as err:  # numpy raises EOFError, ValueError, OSError... for a bad file
        raise BundleError(f"{where}: unreadable ({type(err).__name__}: {err})") from None
    want = (manifest["num_items"] + 1, manifest["dim"])
    if emb.ndim != 2 or emb.shape != want:
        raise BundleError(f"{where}: shape {emb.shape} does not match the manifest {want}")
    if emb.dtype != np.float32:
        raise BundleError(f"{where}: dtype {emb.dtype}, expected float32")
    if not np.isfinite(emb).all():
        raise BundleError(f"{where}: contains NaN or infinite values")
    return np.ascontiguousarray(emb)


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


def _load_tower(path: Path, manifest: dict[str, Any]) -> Any:
    from training.export import load_query_tower  # torch is imported only when serving a model

    try:
        tower = load_query_tower(path, manifest)
    except Exception as err:  # torch/pickle raise many types for a corrupt or mismatched file
        raise BundleError(
            f"{path / 'query_tower.pt'}: cannot load the query tower ({err})"
        ) from None
    tower.eval()
    return tower


def current_version(ws: Workspace) -> str | None:
    """The version named in `models/CURRENT`, or None when nothing is published."""
    try:
        name = ws.current_model_path.read_text().strip()
    except FileNotFoundError:
        return None
    return name or None


def list_versions(ws: Workspace) -> list[str]:
    """Names of the bundle directories under models/ (sorted; temp dirs excluded)."""
    if not ws.models_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in ws.models_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / "manifest.json").is_file()
    )
