"""Bundles: round trip reproduces the in-memory model's top-k; atomic write and publish."""

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from data.errors import RecsysInputError
from model.build import build_model
from model.bundle import (
    Manifest,
    ModelBundle,
    current_version,
    new_version_name,
    publish,
    read_manifest,
    resolve_bundle,
    rollback,
    write_bundle,
)
from model.config import ModelConfig

N_ITEMS = 40


def _items() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "item_idx": list(range(1, N_ITEMS + 1)),
            "item_id": [f"i{k}" for k in range(1, N_ITEMS + 1)],
            "popularity": [k % 7 for k in range(1, N_ITEMS + 1)],
        }
    )


def _manifest(version: str, cfg: ModelConfig | None = None) -> Manifest:
    return Manifest(
        version=version,
        created_at=datetime.now(UTC),
        dataset="toy",
        num_items=N_ITEMS,
        model=cfg or ModelConfig(dim=8, max_len=6),
        temperature=0.05,
        config={"sampler": {"name": "uniform", "num_negatives": 256}},
    )


def _write(
    models_dir: Path, version: str, tower: str = "sasrec", share: bool = True, unit: bool = True
):
    torch.manual_seed(3)
    cfg = ModelConfig(tower=tower, dim=8, max_len=6, share_embeddings=share, normalize=unit)
    model = build_model(cfg, N_ITEMS).eval()
    emb = model.item_tower.all_embeddings().detach().numpy()
    manifest = _manifest(version, cfg)
    path = write_bundle(
        models_dir, manifest, query_tower=model.query_tower, item_embeddings=emb, items=_items()
    )
    return model, emb, path


@pytest.mark.parametrize(
    ("tower", "share", "normalize"),
    [("sasrec", True, True), ("sasrec", False, True), ("mean", True, True), ("sasrec", True, False),
     ("mean", True, False)],
)  # fmt: skip
def test_round_trip_reproduces_top_k(
    tmp_path: Path, tower: str, share: bool, normalize: bool
) -> None:
    model, emb, path = _write(tmp_path / "models", "v1", tower, share, normalize)
    manifest = read_manifest(path)
    assert manifest == _manifest("v1", manifest.model).model_copy(
        update={"created_at": manifest.created_at}
    )  # every field round-trips
    assert (manifest.format_version, manifest.dim, manifest.model.tower.name) == (4, 8, tower)
    loaded = ModelBundle.load(path)
    history = torch.tensor([[0, 0, 3, 9, 12, 5], [1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 17]])
    with torch.no_grad():
        expected = model.query_tower.encode(history) @ torch.from_numpy(emb).T
        got = loaded.query_tower.encode(history) @ torch.from_numpy(loaded.item_embeddings).T
    assert torch.equal(expected.topk(10).indices, got.topk(10).indices)
    assert torch.allclose(expected, got, atol=1e-6)
    items = pl.read_parquet(path / "items.parquet")
    assert items.columns == ["item_idx", "item_id", "popularity", "title"]
    assert items["title"].null_count() == N_ITEMS


def test_publish_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    models = tmp_path / "models"
    _write(models, "v1")
    _write(models, "v2")
    assert current_version(models) is None
    publish(models, "v1")
    assert current_version(models) == "v1"
    publish(models, "v2")
    assert (models / "CURRENT").read_text() == "v2\n"
    assert resolve_bundle(models, None) == models / "v2"
    assert resolve_bundle(models, "v1") == models / "v1"
    assert sorted(p.name for p in models.iterdir()) == ["CURRENT", "v1", "v2"]
    with pytest.raises(RecsysInputError, match="v3"):
        publish(models, "v3")
    assert current_version(models) == "v2"


# `v1/`: `echo v1/ > CURRENT` after tab completion
@pytest.mark.parametrize(
    "written", ["v1/", "./v1", "{models}/v1", "../models/v1", "models/v1/", "x/../v1"]
)
def test_a_hand_edited_current_holding_a_path_names_the_folder(
    tmp_path: Path, written: str
) -> None:
    models = tmp_path / "models"
    _write(models, "v1")
    (models / "CURRENT").write_text(written.format(models=models) + "\n")
    assert current_version(models) == "v1"  # before: the whole path, reloaded at every poll
    assert resolve_bundle(models, None) == models / "v1"


@pytest.mark.parametrize("written", ["/elsewhere/v1", "../v1", "..", "."])
def test_a_current_naming_a_path_outside_models_is_refused_in_one_line(
    tmp_path: Path, written: str
) -> None:
    models = tmp_path / "models"
    _write(models, "v1")
    (models / "CURRENT").write_text(written + "\n")
    with pytest.raises(RecsysInputError, match="not a folder in") as raised:
        current_version(models)
    assert isinstance(raised.value, ValueError)  # what serving treats as CURRENT unreadable
    assert "\n" not in str(raised.value)
    assert rollback(models, "v1") is None  # the fix is not blocked by what it fixes
    assert current_version(models) == "v1"


def test_existing_version_and_failed_write_leave_nothing_visible(tmp_path: Path) -> None:
    models = tmp_path / "models"
    _write(models, "v1")
    with pytest.raises(RecsysInputError, match="already exists"):
        _write(models, "v1")
    bad_emb = np.ones((N_ITEMS + 1, 8), dtype=np.float32)  # padding row not zero
    model = build_model(ModelConfig(dim=8, max_len=6), N_ITEMS)
    with pytest.raises(ValueError, match="row 0"):
        write_bundle(
            models,
            _manifest("v2"),
            query_tower=model.query_tower,
            item_embeddings=bad_emb,
            items=_items(),
        )
    with pytest.raises(ValueError, match="lacks columns"):
        write_bundle(
            models,
            _manifest("v3"),
            query_tower=model.query_tower,
            item_embeddings=np.zeros((N_ITEMS + 1, 8), dtype=np.float32),
            items=_items().drop("popularity"),
        )
    with pytest.raises(ValueError, match=r"must be \[41, 8\] \(n \+ 1, model.dim\)"):
        write_bundle(
            models,
            _manifest("v4"),
            query_tower=model.query_tower,
            item_embeddings=np.zeros((N_ITEMS + 1, 16), dtype=np.float32),
            items=_items(),
        )
    assert sorted(p.name for p in models.iterdir()) == ["v1"]


def test_nan_embeddings_or_tower_weights_are_never_written(tmp_path: Path) -> None:
    models = tmp_path / "models"
    model = build_model(ModelConfig(dim=8, max_len=6), N_ITEMS)
    emb = model.item_tower.all_embeddings().detach().numpy().copy()
    write = dict(query_tower=model.query_tower, items=_items())
    emb[5, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        write_bundle(models, _manifest("v1"), item_embeddings=emb, **write)
    emb[5, 2] = 0.0
    with torch.no_grad():
        next(model.query_tower.parameters()).view(-1)[0] = float("inf")
    with pytest.raises(ValueError, match="query tower weights"):
        write_bundle(models, _manifest("v2"), item_embeddings=emb, **write)
    assert not models.exists() or not any(models.iterdir())


def test_unknown_format_and_missing_bundle(tmp_path: Path) -> None:
    models = tmp_path / "models"
    _, _, path = _write(models, "v1")
    with pytest.raises(RecsysInputError, match="no published model"):
        resolve_bundle(models, None)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RecsysInputError, match="format"):
        read_manifest(path)


def test_version_names_sort_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    moments = iter([1_795_358_101, 1_795_358_102, 1_800_000_000])  # Unix seconds
    utc = time.gmtime
    monkeypatch.setattr(time, "gmtime", lambda: utc(next(moments)))
    names = [new_version_name() for _ in range(3)]
    assert names[0][:16] == "20261122-143501-"  # the UTC date and time, year first
    assert len(names[0]) == len("20261122-143501-ab12") and names == sorted(names)


@pytest.mark.parametrize("name", ["v1 ", " v1", "v\t1", "v\n1", "", "a/b", ".v", "CURRENT"])
def test_a_version_name_current_could_not_name_back_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="bad model version name"):
        _write(tmp_path / "models", name)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
