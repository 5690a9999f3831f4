"""`bench train-step --samplers tapas --tapas-ratios ...`: one row per presample factor."""

import json
from pathlib import Path

import pytest

from tests.benchmarks.helpers import run_bench


def test_tapas_rows_carry_their_ratio_and_the_cost_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_png = tmp_path / "steps.json", tmp_path / "steps.png"
    result = run_bench(
        capsys, "train-step", "--items", "400", "--samplers", "uniform,tapas",
        "--tapas-ratios", "1,8", "--towers", "mean", "--repeats", "1", "--batch", "16",
        "--num-negatives", "16", "--history", "5", "--threads", "1",
        "--out", str(out_json), "--plot", str(out_png),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    payload = json.loads(out_json.read_text())["metrics"]
    rows = [(r["sampler"], r["tapas_ratio"]) for r in payload["results"]]
    assert rows == [("uniform", None), ("tapas", 1), ("tapas", 8)]
    r1, r8 = (r["ms_per_step"] for r in payload["results"][1:])
    assert payload["tapas_cost_vs_smallest_ratio"] == {  # r = 8's time over r = 1's
        "mean n=400": {"tapas r=1": 1.0, "tapas r=8": round(r8 / r1, 3)}
    }
    assert payload["proc_loadavg_at_end"].count(" ") == 4  # /proc/loadavg's 5 fields
