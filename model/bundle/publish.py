"""Which bundle is served: `CURRENT` (publish, roll back, read) and the list of versions.

`CURRENT` is written to a temp file, fsynced and moved over the old one with `os.replace`,
so a reader sees the old name or the new one, never a partial write.
"""

from __future__ import annotations

import json
import os
import secrets
import zipfile
from pathlib import Path
from typing import Any

from data.errors import RecsysInputError
from data.store import atomic_write, fsync_dir
from model.bundle.layout import (
    KEPT_OUT,
    MANIFEST,
    QUERY_TOWER,
    TMP_CURRENT_PREFIX,
    current_path,
)
from model.bundle.manifest import Manifest, read_manifest
from model.bundle.read import ModelBundle


def publish(models_dir: Path, version: str) -> None:
    """Make `version` the served model: write `models/CURRENT` atomically.

    Raises:
        RecsysInputError: no complete bundle of that version exists.

    """
    if not (models_dir / version / MANIFEST).is_file():
        raise RecsysInputError(f"no model bundle {version!r} in {models_dir}")
    tmp = models_dir / f"{TMP_CURRENT_PREFIX}{secrets.token_hex(4)}"
    with open(tmp, "w") as handle:
        handle.write(version + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, current_path(models_dir))
    fsync_dir(models_dir)


def keep_out(models_dir: Path, version: str, reason: str) -> None:
    """Record that the retrain gate did not publish `version`, and why (`models list` says so)."""
    text = json.dumps({"reason": reason}) + "\n"
    atomic_write(models_dir / version / KEPT_OUT, lambda tmp: tmp.write_text(text))


def kept_out_reason(path: Path) -> str | None:
    """Why the retrain gate kept the bundle at `path` out, or None (trained, or published)."""
    try:
        return str(json.loads((path / KEPT_OUT).read_text())["reason"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return "kept out by the retrain gate (its record is unreadable)"


def rollback(models_dir: Path, version: str, force: bool = False) -> str | None:
    """Serve `version` again after the full validation a server does; the previous version.

    A CURRENT that cannot be read or names no bundle folder does not block the rollback
    (it is the fix); the previous version is then None.

    Raises:
        RecsysInputError: no such version, its bundle would be refused (named in the error),
            or the retrain gate kept it out (unless `force`).

    """
    if version not in list_versions(models_dir):
        raise RecsysInputError(f"no model version {version!r} in {models_dir}")
    kept_out = kept_out_reason(models_dir / version)
    if kept_out is not None and not force:
        raise RecsysInputError(
            f"{version} was never published: the retrain gate kept it out ({kept_out}); "
            "--force serves it anyway"
        )
    ModelBundle.load(models_dir / version)  # the tower too: what a server would load
    try:
        previous = current_version(models_dir)
    except (OSError, ValueError):  # CurrentError, a folder, unreadable, not UTF-8
        previous = None
    publish(models_dir, version)
    if kept_out is not None:  # served now: no longer a candidate the gate kept out
        (models_dir / version / KEPT_OUT).unlink(missing_ok=True)
        fsync_dir(models_dir / version)
    return previous


class CurrentError(RecsysInputError, ValueError):
    """`models/CURRENT` names a path outside models/: bad input (exit 2), and a ValueError."""


def current_version(models_dir: Path) -> str | None:
    """The version named by `models/CURRENT`, or None when nothing is published.

    A hand-edited path names its folder, so that it equals the served bundle's version and
    is not loaded again at every poll: `v1/` or `./v1` (the shell's completion writes those),
    and `/abs/home/models/v1`, `../models/v1` (relative to models/) or `models/v1` (relative
    to the home above it) all name `v1`.

    Raises:
        CurrentError: CURRENT names a path that is not a folder directly in `models_dir`.
        OSError, ValueError: CURRENT exists but cannot be read (a folder, not UTF-8...).

    """
    try:
        name = current_path(models_dir).read_text().strip().rstrip("/")
    except FileNotFoundError:
        return None
    parts = Path(name).parts
    if not name or (len(parts) == 1 and name != ".."):
        return parts[0] if parts else None
    for base in (models_dir, models_dir.parent):
        candidate = Path(os.path.abspath(base / name))
        if candidate.name and candidate.parent.resolve() == models_dir.resolve():
            return candidate.name
    raise CurrentError(
        f"{current_path(models_dir)} names {name!r}, which is not a folder in {models_dir}; "
        "write a version's name there, or run `recsys models rollback VERSION`"
    )


def list_versions(models_dir: Path) -> list[str]:
    """Names of the bundle folders under models/ (sorted; temp folders excluded)."""
    if not models_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in models_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).is_file()
    )


def resolve_bundle(models_dir: Path, version: str | None) -> Path:
    """The bundle folder of `version`, or of the published one when `version` is None.

    Raises:
        RecsysInputError: nothing published, or no such version.

    """
    chosen = version or current_version(models_dir)
    if chosen is None:
        raise RecsysInputError(f"no published model in {models_dir}; run `recsys train` first")
    if chosen not in list_versions(models_dir):
        raise RecsysInputError(f"no model bundle {chosen!r} in {models_dir}")
    return models_dir / chosen


def describe(models_dir: Path, version: str, current: str | None) -> dict[str, Any]:
    """One version's summary (`recsys models list`); `broken` says why it would be refused."""
    path = models_dir / version
    try:
        manifest: Manifest | None = read_manifest(path)
    except RecsysInputError:
        manifest = None
    return {
        "version": version,
        "current": version == current,
        **_summary(manifest),
        # an unreadable manifest has no date: the folder's mtime sorts it among the others
        "published_at": manifest.created_at.timestamp() if manifest else path.stat().st_mtime,
        "broken": broken_reason(path),
        "kept_out": kept_out_reason(path),
    }


def _summary(manifest: Manifest | None) -> dict[str, Any]:
    """What `models list` shows of a manifest (None and {} for one that cannot be read)."""
    if manifest is None:
        return {**dict.fromkeys(("created_at", "dataset", "sampler", "num_items")), "metrics": {}}
    return {
        "created_at": manifest.created_at.isoformat(),
        "dataset": manifest.dataset,
        "sampler": manifest.sampler,
        "num_items": manifest.num_items,
        "metrics": manifest.metrics,
    }


def broken_reason(path: Path) -> str | None:
    """Why the bundle at `path` would be refused (no folder, manifest, embeddings, items, tower).

    Cheap enough to run on every version (`recsys models list`): the embeddings are
    memory-mapped and checked in chunks, never read into memory whole, and the tower is
    checked as a file: `torch.save` writes a zip archive, whose directory sits at the end of
    the file, so a truncated or empty `query_tower.pt` is not a zip file.
    """
    tower = path / QUERY_TOWER
    if not path.is_dir():
        return f"{path}: no such bundle folder"
    try:
        ModelBundle.load(path, load_tower=False, map_embeddings=True)
        if not zipfile.is_zipfile(tower):
            raise RecsysInputError(f"{tower}: truncated or not a saved query tower")
    except RecsysInputError as err:
        return str(err).strip().splitlines()[0]
    return None
