"""The model bundle's layout: file names, version names, `CURRENT`.

A bundle is `models/<version>/` holding `manifest.json`, `item_embeddings.npy` (float32
`[n + 1, d]`, L2-normalised unless `model.normalize` is false, row 0 zeros), `query_tower.pt`
(the query tower's state_dict) and `items.parquet` (item_idx, item_id, popularity, title).
`models/CURRENT` names the served version. Every other module reads these names from here
(see docs/architecture.md, Bundle).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import polars as pl

from data.errors import RecsysInputError

MANIFEST = "manifest.json"  # its format: `model.bundle.manifest`
ITEM_EMBEDDINGS = "item_embeddings.npy"
QUERY_TOWER = "query_tower.pt"
ITEMS = "items.parquet"
BUNDLE_FILES = (MANIFEST, ITEM_EMBEDDINGS, QUERY_TOWER, ITEMS)
CURRENT = "CURRENT"
KEPT_OUT = "kept_out.json"  # in a bundle folder: why the retrain gate did not publish it
TMP_BUNDLE_PREFIX = ".tmp-"  # models/.tmp-<version>-<hex>: a bundle being written
TMP_CURRENT_PREFIX = f".{CURRENT}.tmp-"  # models/.CURRENT.tmp-<hex>: CURRENT being replaced

ITEMS_SCHEMA = {
    "item_idx": pl.Int64,
    "item_id": pl.String,
    "popularity": pl.Int64,
    "title": pl.String,
}


def current_path(models_dir: Path) -> Path:
    """`models/CURRENT`: a text file naming the served version, replaced with `os.replace`."""
    return models_dir / CURRENT


def check_version_name(version: str) -> None:
    """Raise RecsysInputError unless `version` is a plain folder name a bundle may take.

    No `/`, no leading dot, not `CURRENT`, and nothing `CURRENT` could not name back: no
    surrounding whitespace (it is read stripped) and no control characters.
    """
    plain = version.strip() == version and version.isprintable()
    if not plain or not version or "/" in version or version.startswith(".") or version == CURRENT:
        raise RecsysInputError(f"bad model version name {version!r}")


def new_version_name() -> str:
    """A sortable, unique-enough version name such as `20261122-143501-ab12` (UTC)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)
