"""ModelBundle.load: a good bundle round-trips; every broken part is named in the error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import torch

from model.bundle import BundleError, Manifest, ModelBundle, RetrainOrigin
from tests.serving.bundles import make_bundle


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "models", "v1", num_items=20, target=7)


def test_load_good_bundle(bundle_dir: Path) -> None:
    b = ModelBundle.load(bundle_dir)
    m = b.manifest
    assert (b.version, m.num_items, m.dim, m.max_len, m.dataset) == ("v1", 20, 16, 8, "planted")
    assert b.item_embeddings.shape == (21, 16) and b.item_ids[3] == "i3"
    assert b.id_to_idx["i20"] == 20 and "" not in b.id_to_idx
    assert b.titles[2] == "Title 2" and b.titles[3] is None
    assert b.popularity[7] == 10_000 and b.popularity[0] == 0


def edit_manifest(bundle_dir: Path, **changes: object) -> None:
    path = bundle_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(changes)
    path.write_text(json.dumps(manifest))


def nan_tower(bundle_dir: Path) -> None:
    path = bundle_dir / "query_tower.pt"
    state = torch.load(path, weights_only=True)
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))
    torch.save(state, path)


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda d: (d / "query_tower.pt").unlink(), "query_tower.pt is missing"),
        (lambda d: (d / "manifest.json").write_text("{oops"), "not valid JSON"),
        (lambda d: edit_manifest(d, format_version=9), "format_version 9 is not supported"),
        (lambda d: edit_manifest(d, num_items=21), "does not match the manifest"),
        (lambda d: edit_manifest(d, dim=16), "dim: Extra inputs are not permitted"),
        (lambda d: edit_manifest(d, num_items=0), "num_items: Input should be greater than"),
        (lambda d: edit_manifest(d, score="cosine"), "score: Input should be 'dot' or 'abs_dot'"),
        (lambda d: edit_manifest(d, model={"dim": 16, "heads": 1}), "model.heads: Extra inputs"),
        (lambda d: edit_manifest(d, version="../x"), "version: bad model version name '../x'"),
        (lambda d: np.save(d / "item_embeddings.npy", np.zeros((21, 16))), "dtype float64"),
        (lambda d: (d / "items.parquet").write_bytes(b"junk"), "items.parquet: unreadable"),
        (
            lambda d: (
                pl.read_parquet(d / "items.parquet").head(5).write_parquet(d / "items.parquet")
            ),
            "item_idx must be exactly 1..20",
        ),
        (lambda d: (d / "query_tower.pt").write_bytes(b"junk"), "cannot load the query tower"),
        (nan_tower, "query_tower.pt: .* holds NaN or infinite weights"),
    ],
)
def test_broken_bundle_is_named(bundle_dir: Path, break_it: object, message: str) -> None:
    break_it(bundle_dir)  # type: ignore[operator]
    with pytest.raises(BundleError, match=message):
        ModelBundle.load(bundle_dir)


def test_missing_manifest_key_and_missing_dir(bundle_dir: Path, tmp_path: Path) -> None:
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    del manifest["model"]
    (bundle_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="missing key\\(s\\) model"):
        ModelBundle.load(bundle_dir)
    with pytest.raises(BundleError, match="directory not found"):
        ModelBundle.load(tmp_path / "nope")


def format_3(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` (format 4) as format 3 wrote it: the tower's name and keys flat in `model`."""
    tower = manifest["model"]["tower"]
    model = {k: v for k, v in manifest["model"].items() if k != "tower"}
    own = {k: v for k, v in tower.items() if k != "name"}
    return {**manifest, "format_version": 3, "model": {**model, "tower": tower["name"], **own}}


def test_a_format_3_bundle_reads_as_format_4_and_serves_the_same(bundle_dir: Path) -> None:
    new = ModelBundle.load(bundle_dir)
    path = bundle_dir / "manifest.json"
    path.write_text(json.dumps(format_3(json.loads(path.read_text()))))
    assert json.loads(path.read_text())["model"]["num_layers"] == 1  # the fixture's one block
    old = ModelBundle.load(bundle_dir)
    assert old.manifest.model == new.manifest.model and old.manifest.format_version == 4
    history = torch.tensor([[0, 3, 5, 7]])
    assert torch.equal(old.query_tower.encode(history), new.query_tower.encode(history))


def format_2(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` (format 4) as format 2 wrote it: dim three times, the sampler twice."""
    manifest = format_3(manifest)
    old = {k: v for k, v in manifest.items() if k != "retrain"}
    config = {**old.pop("config"), "model": manifest["model"]}
    old.update(format_version=2, dim=manifest["model"]["dim"], config=config)
    old["sampler"] = {"name": config["sampler"]["name"], "num_negatives": None}
    return {**old, **(manifest["retrain"] or {})}


def test_a_format_2_bundle_reads_as_format_4(bundle_dir: Path) -> None:
    new = ModelBundle.load(bundle_dir).manifest
    sampler = {"name": "full", "num_negatives": 256}  # flat, as format 2's runs stored it
    retrain = {"previous_version": "v0", "warm_start": True, "since": None}
    edit_manifest(bundle_dir, config={"sampler": sampler, "train": {"lr": 0.1}}, retrain=retrain)
    path = bundle_dir / "manifest.json"
    path.write_text(json.dumps(format_2(json.loads(path.read_text()))))
    old = ModelBundle.load(bundle_dir).manifest
    assert old.model == new.model and old.dim == 16 and old.num_items == new.num_items
    assert old.config == {"sampler": sampler, "train": {"lr": 0.1}}  # once, without `model`
    assert old.run_config() == {**old.config, "model": new.model.model_dump()}
    assert old.retrain == RetrainOrigin(previous_version="v0", warm_start=True)
    assert (old.temperature, old.score, old.metrics) == (0.05, "dot", new.metrics)


def test_a_format_2_manifest_whose_dims_disagree_is_refused(bundle_dir: Path) -> None:
    path = bundle_dir / "manifest.json"
    old = format_2({**json.loads(path.read_text()), "config": {"sampler": {"name": "x"}}})
    path.write_text(json.dumps({**old, "dim": 32}))
    with pytest.raises(BundleError, match="dim 32 differs from model.dim 16"):
        ModelBundle.load(bundle_dir)


def test_format_1_bundle_without_score_loads_as_dot(tmp_path: Path) -> None:
    bundle_dir = make_bundle(tmp_path, "old", num_items=20, target=7, score="abs_dot")
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    assert manifest["format_version"] == 4 and manifest["score"] == "abs_dot"
    manifest = format_2({**manifest, "config": {"sampler": {"name": "uniform"}}})
    del manifest["score"], manifest["temperature"], manifest["dataset"]
    (bundle_dir / "manifest.json").write_text(json.dumps(dict(manifest, format_version=1)))
    old = ModelBundle.load(bundle_dir).manifest
    assert not old.ranks_by_magnitude
    assert (old.temperature, old.dataset) == (old.model.temperature, "workspace")


def test_the_manifest_stores_each_fact_once(bundle_dir: Path) -> None:
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    assert "dim" not in manifest and "sampler" not in manifest and manifest["model"]["dim"] == 16
    with pytest.raises(ValueError, match="must not hold `model`"):
        Manifest.model_validate({**manifest, "config": {"model": manifest["model"]}})
