"""`bench samplers`: one row per (sampler, n, D, b), written as JSON and a plot."""

import json
from pathlib import Path

import pytest

from tests.benchmarks.helpers import run_bench


def test_cli_times_every_sampler_and_each_rff_leaf_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_png = tmp_path / "s.json", tmp_path / "s.png"
    result = run_bench(
        capsys, "samplers", "--items", "300,600", "--features", "16,256",
        "--repeats", "1", "--leaf-size", "1,4", "--threads", "1",
        "--out", str(out_json), "--plot", str(out_png),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    machine = record["machine"]  # the machine's load before and after the timings
    assert machine["load_before"] >= 0 and machine["load_after"] >= 0
    assert machine["torch_threads"] == 1 and machine["cores"] >= 1
    rows = record["metrics"]["results"]
    rff = [(r["items"], r["features"], r["leaf_size"]) for r in rows if r["sampler"] == "rff"]
    # D = 16: b = 1 and 4 (2D / d = 32 / 64 < 1); D = 256: both raised to 2D / d = 8, run once
    assert rff == [(n, f, b) for n in (300, 600) for f, b in ((16, 1), (16, 4), (256, 8))]
    assert {r["sampler"] for r in rows} == {"uniform", "popularity", "exact", "quadratic", "rff"}
    assert all(r["ms_per_batch"] > 0 and r["num_negatives"] == 1024 for r in rows)
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_a_bad_leaf_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_bench(capsys, "samplers", "--leaf-size", "8,x", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "leaf-size" in result.stderr


def test_cli_refuses_an_unwritable_result_file_before_the_work(
    blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for option in ("--out", "--plot"):
        result = run_bench(
            capsys, "samplers", "--items", "300", "--features", "16", "--repeats", "1",
            "--threads", "1", option, str(blocker / "samplers.out"),
        )  # fmt: skip
        assert result.returncode == 2 and option in result.stderr
