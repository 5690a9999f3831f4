"""`recsys models list` (publish order, broken bundles marked) and `rollback`'s full validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import model.bundle.read as bundle_read
from app.cli import app
from data.workspace import Workspace
from model.bundle import ModelBundle, describe
from tests.serving.bundles import make_bundle

ROOT = Path(__file__).resolve().parents[2]


def _set_created_at(bundle: Path, when: str | None) -> None:
    manifest_path = bundle / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if when is None:
        del manifest["created_at"]
    else:
        manifest["created_at"] = when
    manifest_path.write_text(json.dumps(manifest))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_list_sorts_by_publish_time_and_marks_broken_bundles(ws: Workspace) -> None:
    newest = make_bundle(ws.models_dir, "a-newest")
    _set_created_at(newest, "2026-03-01T00:00:00+00:00")
    oldest = make_bundle(ws.models_dir, "c-oldest", publish_it=False)
    _set_created_at(oldest, "2026-01-01T00:00:00+00:00")
    no_date = make_bundle(ws.models_dir, "b-no-date", publish_it=False)
    _set_created_at(no_date, None)  # a broken manifest: sorted by the folder's mtime, 2026-02-01
    stamp = 1_769_904_000  # 2026-02-01T00:00:00Z
    os.utime(no_date, (stamp, stamp))
    _truncate(oldest / "query_tower.pt")

    result = CliRunner().invoke(app, ["models", "list", "--home", str(ws.root), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["models"]
    assert [r["version"] for r in rows] == ["c-oldest", "b-no-date", "a-newest"]
    assert "query_tower.pt" in rows[0]["broken"]
    assert "manifest.json: missing key(s) created_at" in rows[1]["broken"]
    assert rows[2]["broken"] is None and rows[2]["current"]

    result = CliRunner().invoke(app, ["models", "list", "--home", str(ws.root)])
    lines = result.stdout.splitlines()
    assert [line[2:].split()[0] for line in lines] == ["c-oldest", "b-no-date", "a-newest"]
    assert "BROKEN: " in lines[0] and "query_tower.pt" in lines[0]
    assert "2026-02-01T00:00:00+00:00  BROKEN: " in lines[1]
    assert lines[2].startswith("* a-newest  2026-03-01T00:00:00+00:00  dataset=planted")


def test_list_names_the_sampler_and_its_m(ws: Workspace) -> None:
    samplers = {  # the run's sampler settings, as `recsys train` stores them in `config`
        "a": {"name": "uniform", "num_negatives": 256},
        "b": {"name": "full"},
        "c": {"name": "full", "num_negatives": 256},  # a bundle of format 2 (flat settings)
    }
    for version, sampler in samplers.items():
        path = make_bundle(ws.models_dir, version) / "manifest.json"
        manifest = json.loads(path.read_text())
        path.write_text(json.dumps({**manifest, "config": {"sampler": sampler}}))
    lines = CliRunner().invoke(app, ["models", "list", "--home", str(ws.root)]).stdout.splitlines()
    assert " sampler=uniform(m=256) items=60" in lines[0]
    assert " sampler=full items=60" in lines[1] and " sampler=full items=60" in lines[2]


def test_rollback_refuses_a_truncated_query_tower(ws: Workspace) -> None:
    make_bundle(ws.models_dir, "good")
    broken = make_bundle(ws.models_dir, "broken", publish_it=False)
    _truncate(broken / "query_tower.pt")
    done = subprocess.run(
        [sys.executable, "-m", "app", "models", "rollback", "broken", "--home", str(ws.root)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "query_tower.pt" in done.stderr and done.stderr.count("\n") == 1
    assert (ws.models_dir / "CURRENT").read_text().strip() == "good"


def test_a_current_naming_a_path_outside_models_is_one_line_and_exit_2(
    ws: Workspace, run_cli: Callable[..., Any]
) -> None:
    make_bundle(ws.models_dir, "good")
    (ws.models_dir / "CURRENT").write_text("/elsewhere/good\n")
    done = run_cli("models", "list", home=ws.root)
    assert done.returncode == 2, done.stderr  # before: exit 0, the path taken for a version
    assert "not a folder in" in done.stderr and done.stderr.count("\n") == 1


def test_list_maps_the_embeddings_and_checks_them_in_chunks(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = make_bundle(ws.models_dir, "good")
    late_nan = make_bundle(ws.models_dir, "late-nan", publish_it=False)
    emb = np.load(late_nan / "item_embeddings.npy")
    emb[-1, -1] = np.nan  # in the last of the 4-row chunks of the 61 rows
    np.save(late_nan / "item_embeddings.npy", emb)
    monkeypatch.setattr(bundle_read, "FINITE_CHUNK_ROWS", 4)
    modes: list[str | None] = []
    real_load = np.load

    def recording_load(*args: Any, **kwargs: Any) -> Any:
        modes.append(kwargs.get("mmap_mode"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", recording_load)
    rows = [describe(ws.models_dir, v, "good") for v in ("good", "late-nan")]
    assert rows[0]["broken"] is None
    assert "item_embeddings.npy: contains NaN" in rows[1]["broken"]
    assert modes == ["r", "r"]  # before: each table read whole into memory (mmap_mode None)
    served = ModelBundle.load(good)  # the server still reads the table into memory
    assert modes[-1] is None and not isinstance(served.item_embeddings, np.memmap)


def test_a_candidate_the_gate_kept_out_is_marked_and_rolled_back_to_only_with_force(
    ws: Workspace,
) -> None:
    from model.bundle import keep_out

    make_bundle(ws.models_dir, "v1")
    make_bundle(ws.models_dir, "v2", publish_it=False)
    keep_out(ws.models_dir, "v2", "candidate is worse: val ndcg@10 0.01 vs served 0.05")
    home = ["--home", str(ws.root)]
    listed = CliRunner().invoke(app, ["models", "list", *home])
    assert listed.exit_code == 0, listed.output
    assert "KEPT OUT: candidate is worse" in listed.stdout.splitlines()[-1]
    refused = subprocess.run(
        [sys.executable, "-m", "app", "models", "rollback", "v2", *home],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2 and "the retrain gate kept it out" in refused.stderr
    assert (ws.models_dir / "CURRENT").read_text().strip() == "v1"
    forced = CliRunner().invoke(app, ["models", "rollback", "v2", "--force", *home])
    assert forced.exit_code == 0, forced.output
    assert (ws.models_dir / "CURRENT").read_text().strip() == "v2"
    listed = CliRunner().invoke(app, ["models", "list", *home])
    assert "KEPT OUT" not in listed.stdout  # served now


@pytest.mark.parametrize("command", [["models", "list"], ["models", "show", "v1"], ["clean"]])
def test_listing_and_cleaning_a_home_never_import_torch(command: list[str], ws: Workspace) -> None:
    """`models list` validates every bundle but its tower, `show` reads a manifest, `clean`
    looks at files: no torch (each started in about 0.6 s here instead of 2.6 s).
    """
    make_bundle(ws.models_dir, "v1")
    _truncate(make_bundle(ws.models_dir, "v2", publish_it=False) / "query_tower.pt")
    check = (
        "import sys; from app.cli import main\n"
        f"sys.argv = ['recsys', *{command!r}, '--home', {str(ws.root)!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "False"
    if command[1:] == ["list"]:
        assert "* v1" in done.stdout and "BROKEN: " in done.stdout  # v2's tower, found without it
