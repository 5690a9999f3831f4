"""The result records, one schema for every file under benchmarks/results/; what of app the
benchmarks import."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from benchmarks import records
from benchmarks.paths import REPO, RESULTS
from data.errors import RecsysInputError


def test_every_result_file_is_a_record_named_by_its_place() -> None:
    paths = sorted(RESULTS.rglob("*.json"))
    assert len(paths) > 400
    for path in paths:
        doc = json.loads(path.read_text())
        assert records.problems(doc) == [], path
        assert (doc["study"], doc["run"]) == records.location(path), path
        assert isinstance(doc["commit"]["sha"], str) and len(doc["commit"]["sha"]) == 40, path


def test_a_saved_record_has_the_wrapper_and_the_run_it_measured(tmp_path: Path) -> None:
    started = records.start()
    path = tmp_path / "study" / "dataset" / "run.json"
    body = records.save(path, {"k": 1}, {"ndcg@10": 0.5}, started, root=tmp_path / "study",
                        precision="fp32", device="cpu", threads=1)  # fmt: skip
    assert records.read(path) == body and records.problems(body) == []
    assert (body["study"], body["run"]) == ("study", "dataset/run")
    assert body["config"] == {"k": 1} and body["metrics"] == {"ndcg@10": 0.5}
    assert body["machine"]["precision"] == "fp32" and body["machine"]["torch_threads"] == 1
    assert body["machine"]["cores"] >= 1 and body["wall_seconds"] >= 0
    assert set(body["commit"]) == {"sha", "dirty"}
    assert records.location(RESULTS / "a" / "b" / "c.json") == ("a", "b/c")
    assert records.location(tmp_path / "x.json") == (tmp_path.name, "x")


def test_a_record_names_the_code_its_run_began_with(tmp_path: Path) -> None:
    # a run that ends after a later commit names the code it started with, not that commit
    assert records.start().code == records.commit()
    began = records.Started(0.0, 0.0, {"sha": "a" * 40, "dirty": False})  # HEAD moved since
    body = records.save(tmp_path / "s" / "r.json", None, {}, began, root=tmp_path / "s")
    assert body["commit"] == {"sha": "a" * 40, "dirty": False}


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ([], "a list, not an object"),
        ({"schema": 1}, "study: missing"),
        ({"schema": 2}, "schema: 2, not 1"),
    ],
)
def test_anything_else_is_not_a_record(tmp_path: Path, doc: object, problem: str) -> None:
    assert problem in "; ".join(records.problems(doc))
    (tmp_path / "x.json").write_text(json.dumps(doc))
    with pytest.raises(RecsysInputError, match="x.json: not a result record"):
        records.read(tmp_path / "x.json")


def test_of_app_the_benchmarks_import_the_cli_helpers_only() -> None:
    """Cycles, upward and private imports: tests/test_import_graph.py."""
    for path in (REPO / "benchmarks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            assert all(n == "app.cli_common" for n in names if n.split(".")[0] == "app"), path
