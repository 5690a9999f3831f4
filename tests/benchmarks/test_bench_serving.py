"""`bench serving` against a real server: both load phases run, nothing fails."""

import json
from pathlib import Path

import pytest

from tests.benchmarks.helpers import run_bench


def test_bench_serving_loads_a_real_server_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_png = tmp_path / "serving.json", tmp_path / "serving.png"
    result = run_bench(
        capsys, "serving", "--items", "2000", "--duration", "1", "--concurrency", "4",
        "--rate", "50", "--index", "flat", "--dim", "32", "--work-dir", str(tmp_path / "work"),
        "--out", str(out_json), "--plot", str(out_png),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    assert record["machine"]["load_before"] >= 0 and record["machine"]["load_after"] >= 0
    (run,) = record["metrics"]["runs"]
    assert run["items"] == 2000 and run["raw"]["index"]["kind"] == "flat"
    assert run["dim"] == record["config"]["dim"] == run["raw"]["index"]["dim"] == 32
    assert run["raw"]["recall_at_10_vs_exact"] == 1.0  # flat is the exact search
    open_loop, closed = run["loads"]
    assert open_loop["mode"].startswith("open loop") and closed["mode"].startswith("closed")
    for load in (open_loop, closed):
        assert load["requests"] > 0 and load["errors"] == 0
        assert 0 < load["p50_ms"] <= load["p95_ms"] <= load["p99_ms"] <= load["max_ms"]
    assert open_loop["requests"] == 50  # 1 s on the 50 req/s schedule, however fast the server
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("option", "value"),
    [("--rate", "-1"), ("--rate", "0"), ("--rate", "inf"), ("--rate", "nan"),
     ("--duration", "0"), ("--duration", "-2"), ("--duration", "inf"), ("--duration", "nan"),
     ("--concurrency", "0")],
)  # fmt: skip
def test_a_load_that_would_never_end_or_send_nothing_is_refused_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    work = tmp_path / "work"
    result = run_bench(capsys, "serving", "--items", "2000", "--work-dir", str(work), option, value)
    assert result.returncode == 2 and option in result.stderr
    assert not work.exists()  # no bundle written, no server started


def test_an_unwritable_result_file_is_refused_before_any_server(
    tmp_path: Path, blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    for option in ("--out", "--plot"):
        result = run_bench(
            capsys, "serving", "--items", "2000", "--duration", "1",
            "--work-dir", str(work), option, str(blocker / "serving.out"),
        )  # fmt: skip
        assert result.returncode == 2 and option in result.stderr and not work.exists()
