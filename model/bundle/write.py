"""Write a model bundle atomically under `models/<version>/`; find what killed writers left.

Nothing half-written is visible under a name a reader would load: the bundle is written into
a hidden temp folder inside `models/` (with an owner record naming the writer), every file is
fsynced, and the folder is renamed into place (same filesystem, so atomic).
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from data import owner
from data.errors import RecsysInputError
from data.store import fsync_dir, fsync_file
from model.bundle.layout import (
    ITEM_EMBEDDINGS,
    ITEMS,
    ITEMS_SCHEMA,
    QUERY_TOWER,
    TMP_BUNDLE_PREFIX,
    TMP_CURRENT_PREFIX,
)
from model.bundle.manifest import Manifest, write_manifest
from model.bundle.read import all_finite, nonfinite_weights

if TYPE_CHECKING:
    from torch import nn

TEMP_MAX_AGE_S = 3600  # a temp with no owner record this old is a crashed writer's


def _check_embeddings(item_embeddings: np.ndarray, manifest: Manifest) -> np.ndarray:
    emb = np.ascontiguousarray(item_embeddings, dtype=np.float32)
    want = (manifest.num_items + 1, manifest.dim)
    if emb.shape != want:
        raise ValueError(
            f"item_embeddings must be {list(want)} (n + 1, model.dim), got {emb.shape}"
        )
    if np.any(emb[0] != 0):
        raise ValueError("item_embeddings row 0 (padding) must be zeros")
    if not all_finite(emb):  # every reader refuses such a bundle: never write one
        raise ValueError("item_embeddings hold NaN or infinite values (training diverged?)")
    return emb


def _check_tower(query_tower: nn.Module) -> None:
    bad = nonfinite_weights(query_tower)
    if bad:
        raise ValueError(f"query tower weights {bad[:3]} hold NaN or infinite values")


def _items_frame(items: pl.DataFrame) -> pl.DataFrame:
    if "title" not in items.columns:
        items = items.with_columns(pl.lit(None, dtype=pl.String).alias("title"))
    missing = set(ITEMS_SCHEMA) - set(items.columns)
    if missing:
        raise ValueError(f"items frame lacks columns {sorted(missing)}")
    return items.select([pl.col(c).cast(t) for c, t in ITEMS_SCHEMA.items()]).sort("item_idx")


def stale_temps(models_dir: Path, now: float | None = None) -> list[tuple[Path, str]]:
    """Temp bundles and CURRENT temp files that killed writers left in `models_dir`.

    A temp bundle is stale when its writer's owner record says the writer died, or, without a
    record (a writer killed before writing it, or an older version), after TEMP_MAX_AGE_S; a
    CURRENT temp file (live for milliseconds) after TEMP_MAX_AGE_S too.

    Returns:
        (path, why) pairs; nothing a live writer is filling.

    """
    if not models_dir.is_dir():
        return []
    now = time.time() if now is None else now
    found = []
    for path in sorted(models_dir.iterdir()):
        if not path.name.startswith((TMP_BUNDLE_PREFIX, TMP_CURRENT_PREFIX)):
            continue
        try:
            age_s = now - path.stat().st_mtime
        except FileNotFoundError:  # another writer finished or cleaned it meanwhile
            continue
        record = path / owner.OWNER_FILE
        why = owner.abandoned_reason(record) if path.is_dir() else None
        if why is None and owner.read_owner(record) is None and age_s > TEMP_MAX_AGE_S:
            why = f"unfinished for {age_s / 3600:.1f} hours"
        if why is not None:
            found.append((path, why))
    return found


def remove_path(path: Path) -> None:
    """Delete a file or folder tree (what `stale_temps` and run clean-up name)."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def write_bundle(
    models_dir: Path,
    manifest: Manifest,
    *,
    query_tower: nn.Module,
    item_embeddings: np.ndarray,
    items: pl.DataFrame,
) -> Path:
    """Write a bundle atomically to `models_dir/<manifest.version>/` and return that path.

    Args:
        models_dir: The workspace's `models/` folder (created if missing).
        manifest: The bundle's manifest; its `version` names the folder, which must not exist.
        query_tower: The trained query tower, built from `manifest.model`; its state_dict is
            saved (moved to CPU).
        item_embeddings: float32 `[n + 1, d]` (`ItemTower.all_embeddings`), row 0 zeros.
        items: `item_idx, item_id, popularity, title` (title may be absent or null).

    Raises:
        RecsysInputError: the version already exists.
        ValueError: embeddings of the wrong shape, a non-zero padding row, or a NaN or infinite
            value in the embeddings or the tower (readers refuse those).

    """
    target = models_dir / manifest.version
    if target.exists():
        raise RecsysInputError(f"model version {manifest.version!r} already exists in {models_dir}")
    emb = _check_embeddings(item_embeddings, manifest)
    _check_tower(query_tower)
    models_dir.mkdir(parents=True, exist_ok=True)
    for path, _why in stale_temps(models_dir):
        remove_path(path)
    tmp = models_dir / f"{TMP_BUNDLE_PREFIX}{manifest.version}-{secrets.token_hex(4)}"
    tmp.mkdir()
    owner.claim(tmp / owner.OWNER_FILE)
    try:
        _write_files(tmp, query_tower, emb, _items_frame(items), manifest)
        (tmp / owner.OWNER_FILE).unlink()
        fsync_dir(tmp)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(models_dir)
    return target


def _write_files(
    folder: Path, tower: nn.Module, emb: np.ndarray, items: pl.DataFrame, manifest: Manifest
) -> None:
    """Write and fsync every bundle file; the manifest goes last (it marks a complete bundle)."""
    import torch  # here: the bundle package is imported by commands that never write one

    np.save(folder / ITEM_EMBEDDINGS, emb)
    torch.save({k: v.detach().cpu() for k, v in tower.state_dict().items()}, folder / QUERY_TOWER)
    items.write_parquet(folder / ITEMS)
    for name in (ITEM_EMBEDDINGS, QUERY_TOWER, ITEMS):
        fsync_file(folder / name)
    write_manifest(folder, manifest)
