"""`bench profile`: a real tiny training profiled phase by phase, and its files."""

import json
from pathlib import Path

import pytest

from data.synth import generate_events
from tests.benchmarks.helpers import run_bench
from tests.training.tiny import EVERY_POSITION, flags
from training.loop.lit_module import PHASES

# a target at every position: a few steps an epoch
TINY = flags(["model.dim=16", "model.max_len=10", "train.batch_size=16", *EVERY_POSITION])
TINY += ["--num-negatives", "16"]  # the full softmax draws none


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "log.csv"
    generate_events(120, 80, 2500, seed=2).write_csv(path)
    return path


def test_profile_accounts_for_the_step_and_writes_files(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, png = tmp_path / "profile.json", tmp_path / "profile.png"
    args = ["profile", "--dataset", str(log), "--samplers", "full,uniform"]
    # the fewest steps: one profiled after the warm-up, and the gap before it
    done = run_bench(capsys, *args, "--steps", "6", *TINY, "--out", str(out), "--plot", str(png))
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    assert record["config"]["samplers"] == ["full", "uniform"] and record["config"]["steps"] == 6
    full, uniform = record["metrics"]["results"]
    for row in (full, uniform):
        phases = row["phases_ms"]
        assert row["steps_profiled"] == 1 and row["precision"] == "fp32"  # pinned: fp32 limit
        assert phases["tower"] > 0 and phases["backward"] > 0 and phases["loss"] > 0
        assert row["flops_per_step"] > 0 and row["arithmetic_limit_ms"] > 0
        assert row["validation_s"] > 0 and 100 < row["validation_users"] <= 120  # 3+ events
        step_ms = row["ms_per_step"] - phases["data and loop"]
        profiled = sum(phases[name] for name in PHASES)  # the labelled phases of a step
        assert phases["lightning in step"] >= 0 and profiled <= step_ms + 0.1  # rounding
        assert phases["data and loop"] > 0
    assert full["phases_ms"]["sampler"] == 0 and uniform["phases_ms"]["sampler"] > 0
    assert full["flops_per_step"] > uniform["flops_per_step"]  # logits over every item
    assert png.stat().st_size > 0


@pytest.mark.parametrize("steps", ["1", "5"])
def test_too_few_steps_to_profile_is_an_error_about_the_option(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: str
) -> None:
    out = tmp_path / "profile.json"
    args = ["profile", "--dataset", str(log), "--samplers", "full", "--steps", steps]
    done = run_bench(capsys, *args, *TINY, "--out", str(out))
    assert done.returncode == 2 and f"--steps {steps}" in done.stderr
    assert str(log) not in done.stderr and not out.exists()


def test_an_unwritable_result_file_is_refused_before_the_work(
    log: Path, blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["profile", "--dataset", str(log), "--samplers", "full", "--steps", "6"]
    for option in ("--out", "--plot"):
        done = run_bench(capsys, *args, *TINY, option, str(blocker / "profile.out"))
        assert done.returncode == 2 and option in done.stderr


def test_a_bad_sampler_is_refused_before_any_is_profiled(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    args = ["profile", "--dataset", str(log), "--samplers", "full,unifrom"]
    args += ["--steps", "6", "--home", str(home), "--out", str(tmp_path / "profile.json")]
    done = run_bench(capsys, *args, *TINY)
    assert done.returncode == 2 and "unknown sampler 'unifrom'" in done.stderr
    assert not home.exists()  # `full`'s dataset was not even ingested
