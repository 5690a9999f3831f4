"""Bundles are durable (every file fsynced before the rename); killed writers' temps go away.

Loading a broken bundle file through the export's loaders names the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from data import owner
from data.errors import RecsysInputError
from model.build import build_query_tower
from model.bundle import Manifest, ModelBundle, load_query_tower, read_manifest, write_bundle
from model.config import ModelConfig

MODEL = ModelConfig(tower="mean", dim=8, max_len=4)
N = 10


def _write(models_dir: Path, version: str) -> Path:
    emb = np.zeros((N + 1, 8), np.float32)
    emb[1:, 0] = 1.0
    items = pl.DataFrame(
        {
            "item_idx": range(1, N + 1),
            "item_id": [f"i{k}" for k in range(1, N + 1)],
            "popularity": [1] * N,
        }  # fmt: skip
    )
    manifest = Manifest(
        version=version, created_at=datetime.now(UTC), dataset="toy", num_items=N, model=MODEL,
        temperature=0.1,
    )  # fmt: skip
    return write_bundle(
        models_dir, manifest, query_tower=build_query_tower(MODEL, N), item_embeddings=emb,
        items=items,
    )  # fmt: skip


def test_every_bundle_file_is_fsynced_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def spy_fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def spy_rename(src: str, dst: str) -> None:
        synced.append(f"rename {os.path.basename(dst)}")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", spy_fsync)
    monkeypatch.setattr(os, "rename", spy_rename)
    _write(tmp_path / "models", "v1")
    renamed = synced.index("rename v1")
    for name in ("item_embeddings.npy", "query_tower.pt", "items.parquet", "manifest.json"):
        assert name in synced[:renamed], synced
    assert not (tmp_path / "models" / "v1" / owner.OWNER_FILE).exists()


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def test_write_removes_only_temps_of_dead_writers(tmp_path: Path) -> None:
    models = tmp_path / "models"
    dead, alive, young, old = (models / f".tmp-{k}-0000" for k in ("dead", "live", "young", "old"))
    for folder in (dead, alive, young, old):
        folder.mkdir(parents=True)
        (folder / "item_embeddings.npy").write_bytes(b"half")
    owner.claim(dead / owner.OWNER_FILE)
    record = owner.read_owner(dead / owner.OWNER_FILE) or {}
    (dead / owner.OWNER_FILE).write_text(f'{{"host": "{record["host"]}", "pid": {_dead_pid()}}}')
    owner.claim(alive / owner.OWNER_FILE)  # this process: a writer still at work
    os.utime(old, (time.time() - 7200, time.time() - 7200))  # no record, two hours old
    stale_current = models / ".CURRENT.tmp-abcd"
    stale_current.write_text("v0\n")
    os.utime(stale_current, (time.time() - 7200, time.time() - 7200))
    _write(models, "v1")
    assert not dead.exists() and not old.exists() and not stale_current.exists()
    assert alive.exists() and young.exists()


def test_loaders_name_the_broken_file(tmp_path: Path) -> None:
    bundle = _write(tmp_path / "models", "v1")
    manifest = read_manifest(bundle)
    (bundle / "item_embeddings.npy").write_bytes(b"")  # numpy: EOFError
    with pytest.raises(RecsysInputError, match="item_embeddings.npy: unreadable"):
        ModelBundle.load(bundle, load_tower=False)
    tower = bundle / "query_tower.pt"
    tower.write_bytes(tower.read_bytes()[:100])
    with pytest.raises(RecsysInputError, match="query_tower.pt: cannot load"):
        load_query_tower(bundle, manifest)
    torch.save({"wrong": torch.zeros(1)}, tower)
    with pytest.raises(RecsysInputError, match="query_tower.pt: cannot load"):
        load_query_tower(bundle, manifest)
