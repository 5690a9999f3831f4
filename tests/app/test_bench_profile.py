"""`recsys bench profile`: a real tiny training profiled phase by phase, and its files."""

import json
from pathlib import Path

import pytest

from data.synth import generate_events
from tests.app.test_data_cli import run_inproc

TINY = ["--set", "model.dim=16", "--set", "model.max_len=10", "--set", "train.batch_size=16"]
TINY += ["--set", "sampler.num_negatives=16"]


def test_profile_accounts_for_the_step_and_writes_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.csv"
    generate_events(120, 80, 2500, seed=2).write_csv(log)
    out, png = tmp_path / "profile.json", tmp_path / "profile.png"
    args = ["bench", "profile", "--dataset", str(log), "--samplers", "full,uniform"]
    done = run_inproc(capsys, *args, "--steps", "8", *TINY, "--json", str(out), "--plot", str(png))
    assert done.returncode == 0, done.stderr
    payload = json.loads(out.read_text())
    full, uniform = payload["results"]
    for row in (full, uniform):
        phases = row["phases_ms"]
        assert phases["tower"] > 0 and phases["backward"] > 0 and phases["loss"] > 0
        assert row["flops_per_step"] > 0 and row["arithmetic_limit_ms"] > 0
        assert row["validation_s"] > 0 and 100 < row["validation_users"] <= 120  # 3+ events
        in_step = sum(v for k, v in phases.items() if k != "data and loop")
        assert abs(in_step + phases["data and loop"] - row["ms_per_step"]) < 0.5
    assert full["phases_ms"]["sampler"] == 0 and uniform["phases_ms"]["sampler"] > 0
    assert full["flops_per_step"] > uniform["flops_per_step"]  # logits over every item
    assert png.stat().st_size > 0
