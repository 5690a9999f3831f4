"""`bench index` on tiny catalogues: one row per kind, recall against brute force, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from benchmarks.cli import bench_app
from benchmarks.harness import options
from benchmarks.speed.indexes import catalogue
from serving.index_kinds import FlatIndex, HNSWIndex, IndexParams, IVFIndex, IVFPQIndex
from serving.index_recall import recall_against
from tests.benchmarks.helpers import run_bench

SMALL = ["--items", "300", "--kinds", "flat", "--dim", "8", "--clusters", "4", "--queries", "20"]
SMALL += ["--latency-queries", "10"]


def test_the_synthetic_catalogue_is_clustered_and_its_queries_share_the_centres() -> None:
    table, queries = catalogue(2000, 16, 8, 50)
    assert table.shape == (2001, 16) and not table[0].any()
    assert np.allclose(np.linalg.norm(table[1:], axis=1), 1.0, atol=1e-5)
    best = (queries @ table[1:].T).max(axis=1)
    assert best.min() > 0.5  # every query lies near some items: 8 centres, not random directions


@pytest.mark.parametrize(
    ("cls", "params", "bound"),
    [
        (HNSWIndex, IndexParams(kind="hnsw"), 0.95),
        (IVFIndex, IndexParams(kind="ivf", ivf_nprobe=16), 0.95),
        (IVFPQIndex, IndexParams(kind="ivfpq", ivf_nprobe=16), 0.6),
    ],
)
def test_approximate_recall_on_clustered_embeddings(
    cls: type, params: IndexParams, bound: float
) -> None:
    """The service's indexes on the benchmark's catalogue: items and queries around 32 centres
    (measured: 1.0, 1.0 and 0.70 recall@10)."""
    item_table, queries = catalogue(2000, 32, 32, 200)
    exact, _ = FlatIndex(item_table, IndexParams()).search(queries, 10)
    approx, scores = cls(item_table, params).search(queries, 10)
    assert recall_against(approx, exact - 1) >= bound  # exact's rows: item_idx - 1
    assert approx.min() >= 1 and np.all(np.diff(scores, axis=1) <= 1e-6)


def test_bench_index_compares_the_kinds_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "index.json"
    args = ["index", "--items", "3000", "--kinds", "flat,ivfpq,hnsw", "--dim", "16"]
    args += ["--clusters", "16", "--queries", "100", "--latency-queries", "20", "--out", str(out)]
    first = CliRunner().invoke(bench_app, args)
    assert first.exit_code == 0, first.output
    payload = json.loads(out.read_text())["metrics"]
    rows = {row["kind"]: row for row in payload["rows"]}
    assert set(rows) == {"flat", "ivfpq", "hnsw"} and out.with_suffix(".png").is_file()
    assert rows["flat"]["search"][0]["recall@10"] == 1.0  # brute force against brute force
    assert [s["hnsw_ef_search"] for s in rows["hnsw"]["search"]] == [64, 128, 256]
    assert rows["hnsw"]["search"][-1]["recall@10"] > 0.9
    assert 0.0 < rows["ivfpq"]["search"][0]["recall@10"] < 1.0  # 4-byte codes lose neighbours
    assert rows["ivfpq"]["index_file_mib"] < rows["flat"]["index_file_mib"]
    for row in payload["rows"]:
        assert all(0 < s["search_p50_ms"] <= s["search_p99_ms"] for s in row["search"])
    again = CliRunner().invoke(bench_app, args)  # every row is there: nothing is built again
    assert again.exit_code == 0 and "exact top" not in again.output
    assert json.loads(out.read_text())["metrics"]["rows"] == payload["rows"]
    bad = CliRunner().invoke(bench_app, ["index", "--kinds", "flat,lsh", "--out", str(out)])
    assert bad.exit_code != 0 and "unknown index kinds ['lsh']" in bad.output
    wider = tmp_path / "pq8.json"  # 8 sub-quantizers: 8 bytes an item instead of 4
    more = [*args[:4], "ivfpq", *args[5:-1], str(wider), "--pq-m", "8"]
    another_setting = [*more[:-3], str(out), "--pq-m", "8"]
    refused = CliRunner().invoke(bench_app, another_setting)
    assert refused.exit_code != 0
    assert json.loads(out.read_text())["metrics"]["rows"] == payload["rows"]
    assert CliRunner().invoke(bench_app, more).exit_code == 0
    (row,) = json.loads(wider.read_text())["metrics"]["rows"]
    assert row["index"]["bytes_per_item"] == 8 and rows["ivfpq"]["index"]["bytes_per_item"] == 4


@pytest.mark.parametrize("option", ["--dim", "--clusters", "--queries", "--latency-queries"])
def test_bench_index_refuses_a_zero_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    args = list(SMALL)
    args[args.index(option) + 1] = "0"
    done = run_bench(capsys, "index", *args, "--out", str(tmp_path / "index.json"))
    assert done.returncode == 2 and option in done.stderr


def test_a_truncated_result_file_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "index.json"
    out.write_text('{"setting": {"dim": 8, "clus')  # what a kill during a plain write left
    done = run_bench(capsys, "index", *SMALL, "--out", str(out))
    assert done.returncode == 2 and "not a result record" in done.stderr
    assert "Traceback" not in done.stderr


def test_results_are_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "index.json"
    out.write_text('{"rows": []}\n')
    write_text = Path.write_text

    def killed_halfway(path: Path, text: str) -> int:  # the write stops after a few bytes
        write_text(path, text[:5])
        raise OSError("killed")

    monkeypatch.setattr(Path, "write_text", killed_halfway)
    with pytest.raises(OSError, match="killed"):
        options.write_output(out, lambda tmp: tmp.write_text('{"rows": [1, 2, 3]}'))
    monkeypatch.undo()
    assert out.read_text() == '{"rows": []}\n' and [p.name for p in tmp_path.iterdir()] == [
        "index.json"
    ]


def test_bench_index_refuses_an_unwritable_result_file_before_the_work(
    blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = run_bench(capsys, "index", *SMALL, "--out", str(blocker / "index.json"))
    assert done.returncode == 2 and "--out" in done.stderr and "exact top" not in done.stdout
