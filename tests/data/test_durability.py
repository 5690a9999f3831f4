"""The store survives a power loss: files fsynced before their rename, folders after it; a
damaged vocabulary is rebuilt from the parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from data.ingest import ingest_files
from data.vocab import load_item_vocab
from data.workspace import Workspace


def test_an_unreadable_vocabulary_is_rebuilt(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("user_id,item_id,timestamp\nu1,b,20\nu1,a,10\nu2,c,5\n")
    ingest_files(ws, [path])
    expected = load_item_vocab(ws)
    ws.items_vocab_path.write_bytes(b"")  # what a power cut before a data flush can leave
    assert load_item_vocab(ws).equals(expected)


def test_a_part_is_fsynced_before_its_rename_and_its_folder_after(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data import store

    path = tmp_path / "a.csv"
    path.write_text("user_id,item_id,timestamp\nu,i,1\n")
    calls: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        calls.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(store.os, "fsync", fsync)
    monkeypatch.setattr(store.os, "replace", replace)
    ingest_files(ws, [path])
    (part,) = store.part_paths(ws)
    rename = calls.index(("replace", str(part)))
    staged = [p for kind, p in calls[:rename] if kind == "fsync"]
    assert any(Path(p).name.endswith(part.name) and Path(p).name != part.name for p in staged)
    assert ("fsync", str(ws.events_dir.resolve())) in calls[rename:]
    vocab = calls.index(("replace", str(ws.items_vocab_path)))
    assert ("fsync", str(ws.vocab_dir.resolve())) in calls[vocab:]
