"""A broken bundle never stops reloading: every load error is a refused reload, on record.

Each case breaks a published bundle the way a crash or a bad copy does; before the fix an
empty `item_embeddings.npy` (numpy's EOFError) escaped the reload path and killed the poller.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from data.errors import RecsysInputError
from data.ingest import ingest_rows
from data.workspace import Workspace
from model.build import build_query_tower
from model.bundle import BundleError, ModelBundle
from serving.service import ModelService
from tests.serving.bundles import make_bundle


def truncate(path: Path, keep: int = 0) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def nan_rows(bundle: Path) -> None:
    emb = np.load(bundle / "item_embeddings.npy")
    emb[3] = np.nan
    np.save(bundle / "item_embeddings.npy", emb)


def bad_tower_kwargs(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["model"]["tower"]["num_heads"] = 3  # 16 is not divisible by 3: torch would assert
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def wider_tower(bundle: Path) -> None:
    """A tower of width 32 saved where the manifest (and the embeddings) say 16."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    tower = build_query_tower({**manifest["model"], "dim": 32}, manifest["num_items"])
    torch.save(tower.state_dict(), bundle / "query_tower.pt")


def npz_under_the_npy_name(bundle: Path) -> None:
    with open(bundle / "item_embeddings.npy", "wb") as handle:
        np.savez(handle, np.zeros((31, 16), np.float32))


BREAKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty embeddings": (lambda b: truncate(b / "item_embeddings.npy"), "item_embeddings.npy"),
    "truncated embeddings": (
        lambda b: truncate(b / "item_embeddings.npy", 200),
        "item_embeddings.npy",
    ),
    "wrong shape": (
        lambda b: np.save(b / "item_embeddings.npy", np.zeros((5, 16), np.float32)),
        "item_embeddings.npy",
    ),
    "NaN embeddings": (nan_rows, "item_embeddings.npy: contains NaN"),
    "npz archive": (npz_under_the_npy_name, "item_embeddings.npy: not a single array"),
    "empty tower": (lambda b: truncate(b / "query_tower.pt"), "query_tower.pt"),
    "truncated tower": (lambda b: truncate(b / "query_tower.pt", 300), "query_tower.pt"),
    "tower kwargs": (bad_tower_kwargs, "manifest.json: model: model.dim 16 is not divisible"),
    "tower width": (wider_tower, "query_tower.pt: cannot load the query tower"),
    "empty items": (lambda b: truncate(b / "items.parquet"), "items.parquet"),
    "empty manifest": (lambda b: truncate(b / "manifest.json"), "manifest.json"),
    "file is a folder": (
        lambda b: (os.remove(b / "items.parquet"), (b / "items.parquet").mkdir()),
        "items.parquet",
    ),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_any_broken_file_is_a_refused_reload_and_polling_goes_on(tmp_path: Path, case: str) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    svc = ModelService(ws)
    svc.poll_once()
    assert svc.current is not None and svc.current.version == "v1"
    break_it, names = BREAKS[case]
    break_it(make_bundle(ws.models_dir, "v2", num_items=30, target=21, seed=1))
    with pytest.raises(RecsysInputError, match=names.replace(".", r"\.")):
        svc.reload()
    assert svc.current.version == "v1"
    svc.poll_once()  # never raises; an unchanged broken bundle is not loaded again
    state = svc.status()
    assert (state.served, state.published, state.failed_reloads) == ("v1", "v2", 1)
    assert state.last_error is not None and names in state.last_error
    make_bundle(ws.models_dir, "v3", num_items=30, target=22, seed=2)
    svc.poll_once()
    assert svc.current.version == "v3" and svc.status().last_error is None


def test_first_load_of_a_broken_bundle_then_a_fixed_current(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    broken = make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    truncate(broken / "item_embeddings.npy")
    svc = ModelService(ws)
    svc.poll_once()
    assert svc.current is None and "item_embeddings.npy" in (svc.last_error or "")
    truncate(broken / "item_embeddings.npy")  # rewritten (new mtime), still broken: tried again
    os.utime(broken / "item_embeddings.npy", ns=(1, 1))
    svc.poll_once()
    assert svc.status().failed_reloads == 2
    make_bundle(ws.models_dir, "v2", num_items=30, target=21, seed=1)
    svc.poll_once()
    assert svc.current is not None and svc.current.version == "v2"


def test_unreadable_current_is_a_failed_reload_not_a_crash(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20, publish_it=False)
    (ws.models_dir / "CURRENT").mkdir(parents=True)  # CURRENT is a folder
    svc = ModelService(ws)
    svc.poll_once()
    assert svc.current is None and "CURRENT: unreadable" in (svc.last_error or "")
    assert svc.status().failed_reloads == 1
    (ws.models_dir / "CURRENT").rmdir()
    (ws.models_dir / "CURRENT").write_text("v1\n")
    svc.poll_once()
    assert svc.current is not None and svc.current.version == "v1"


def test_nothing_published_is_reported_but_not_counted_as_a_failure(tmp_path: Path) -> None:
    svc = ModelService(Workspace(tmp_path / "home"))
    for _ in range(3):
        svc.poll_once()
    state = svc.status()
    assert state.failed_reloads == 0 and "no model is published" in (state.last_error or "")


def v1_served_after_v2_refused(tmp_path: Path) -> tuple[Workspace, ModelService]:
    """A service that loaded v1, then polled a published v2 with a truncated tower (refused)."""
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    svc = ModelService(ws)
    svc.poll_once()
    truncate(make_bundle(ws.models_dir, "v2", num_items=30, target=21, seed=1) / "query_tower.pt")
    svc.poll_once()
    return ws, svc


def test_rolling_current_back_to_the_served_version_clears_the_error(tmp_path: Path) -> None:
    ws, svc = v1_served_after_v2_refused(tmp_path)
    assert svc.status().last_error is not None
    (ws.models_dir / "CURRENT").write_text("v1\n")  # `recsys models rollback v1`
    svc.poll_once()
    state = svc.status()
    assert (state.served, state.published, state.last_error) == ("v1", "v1", None)
    assert state.failed_reloads == 1


def test_new_events_reach_histories_while_current_names_a_refused_bundle(tmp_path: Path) -> None:
    ws, svc = v1_served_after_v2_refused(tmp_path)
    assert svc.status().failed_reloads == 1
    ingest_rows(ws, [("u1", "i3", 1), ("u1", "i4", 2)])  # `recsys ingest` meanwhile
    svc.poll_once()
    assert svc.histories.get("u1") == ("i3", "i4")
    assert svc.status().failed_reloads == 1  # the refused bundle is not tried again


def test_a_copied_bundle_is_served_under_its_folder_name_and_loaded_once(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    shutil.copytree(ws.models_dir / "v1", ws.models_dir / "v1-restore")
    (ws.models_dir / "CURRENT").write_text("v1-restore\n")  # `recsys models rollback v1-restore`
    svc = ModelService(ws)
    assert svc.reload().changed
    assert not svc.reload().changed  # before: "v1-restore" != manifest "v1", rebuilt every poll
    state = svc.status()
    assert (state.served, state.published) == ("v1-restore", "v1-restore")
    assert svc.current is not None and svc.current.bundle.manifest.version == "v1"


def test_a_tower_wider_than_the_embeddings_is_refused_at_load(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "v1", num_items=30, target=20, publish_it=False)
    wider_tower(bundle)
    # before: loaded, and search reshaped each [1, 32] query into two [1, 16] queries
    with pytest.raises(BundleError, match="(?s)cannot load the query tower .*size mismatch"):
        ModelBundle.load(bundle)


def test_a_hand_edited_dot_slash_current_is_the_served_version(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    svc = ModelService(ws)
    assert svc.reload().changed
    (ws.models_dir / "CURRENT").write_text("./v1\n")
    assert not svc.reload().changed  # before: "./v1" != "v1", the bundle loaded at every poll
    assert not svc.reload().changed
    assert svc.status().published == "v1" and svc.status().last_error is None


def test_a_current_holding_a_path_is_the_served_version_or_a_refused_reload(
    tmp_path: Path,
) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    svc = ModelService(ws)
    assert svc.reload().changed
    (ws.models_dir / "CURRENT").write_text(f"{ws.models_dir / 'v1'}\n")
    assert not svc.reload().changed  # before: the path != "v1", the bundle loaded at every poll
    assert svc.status().published == "v1" and svc.status().last_error is None
    (ws.models_dir / "CURRENT").write_text(f"{tmp_path / 'v1'}\n")  # outside models/
    with pytest.raises(RecsysInputError, match="not a folder in"):
        svc.reload()
    assert svc.status().served == "v1" and svc.status().failed_reloads == 1


def test_a_current_with_a_nul_byte_is_a_refused_reload(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    make_bundle(ws.models_dir, "v1", num_items=30, target=20)
    svc = ModelService(ws)
    svc.reload()
    (ws.models_dir / "CURRENT").write_text("v1\x00\n")
    with pytest.raises(RecsysInputError):  # before: ValueError (embedded null byte), a 500
        svc.reload()
    state = svc.status()
    assert (state.served, state.failed_reloads) == ("v1", 1) and state.last_error
    svc.poll_once()  # the same CURRENT is not tried again, and nothing escapes
    assert svc.status().failed_reloads == 1
