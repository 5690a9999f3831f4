"""`bench train-step`: the timed step is the training step, and the CLI writes its files."""

import json
from pathlib import Path

import pytest
import torch

from benchmarks.speed.step_phases import PhaseClock
from benchmarks.speed.step_timing import random_batch, step_config, zipf_counts
from benchmarks.speed.step_traffic import traffic_mb
from tests.benchmarks.helpers import run_bench
from training.loop.module_build import build_module

SMALL = {"num_negatives": 16, "dim": 8, "length": 5, "batch": 12}


def _one_step(sampler: str, n: int = 200) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Item table before and after one `optimisation_step`, and the batch's item ids."""
    counts = zipf_counts(n, torch.Generator().manual_seed(0))
    module = build_module(step_config(sampler, "mean", SMALL), n, counts)
    module.on_train_start()
    opts = module.standalone_optimizers()
    inputs, targets = random_batch(counts, SMALL["batch"], SMALL["length"], torch.Generator())
    before = module.model.item_embedding_weight.detach().clone()
    loss = module.optimisation_step((inputs, targets), opts, torch.Tensor.backward)
    assert torch.isfinite(loss)
    return before, module.model.item_embedding_weight.detach(), torch.cat([inputs, targets])


def test_sampled_step_moves_only_the_batch_items_and_negatives() -> None:
    before, after, batch_items = _one_step("uniform")
    changed = (before != after).any(dim=1).nonzero().flatten()
    assert changed.numel() > 0
    untouched_batch_items = set(changed.tolist()) - set(batch_items.flatten().tolist())
    assert len(untouched_batch_items) <= SMALL["num_negatives"]  # only negatives beside the batch
    assert changed.numel() < before.shape[0] // 2  # most of the 200 rows stay put


def test_a_step_counts_the_rows_it_moved_and_prices_their_traffic() -> None:
    n, args = 200, {**SMALL, "overrides": ["sampler.per_query=true"]}
    counts = zipf_counts(n, torch.Generator().manual_seed(0))
    module = build_module(step_config("uniform", "mean", args), n, counts)
    module.on_train_start()
    opts, clock = module.standalone_optimizers(), PhaseClock()
    backward = clock.attach(module, opts)
    batch = random_batch(counts, SMALL["batch"], SMALL["length"], torch.Generator(), every=True)
    before = module.model.item_embedding_weight.detach().clone()
    module.optimisation_step(batch, opts, backward)
    moved = (before != module.model.item_embedding_weight.detach()).any(dim=1).sum()
    assert clock.touched_rows() == moved > SMALL["num_negatives"]
    q, m, d = SMALL["batch"] * SMALL["length"], SMALL["num_negatives"], SMALL["dim"]
    row = {"sampler": "uniform", "per_query": True, "queries": q, "num_negatives": m, "dim": d,
           "items": n, "batch": SMALL["batch"]}  # fmt: skip
    mb = traffic_mb(row, module.sampler, clock.touched_rows())
    assert mb is not None and mb["sampler_update"] == 0.0
    assert mb["negatives_logits"] == round(4 * q * m * d * 4 / 1e6, 1)
    assert mb["optimizer"] == round(7 * int(moved) * d * 4 / 1e6, 1)
    assert traffic_mb({**row, "sampler": "in-batch"}, module.sampler, 1.0) is None
    shared = traffic_mb({**row, "per_query": False}, module.sampler, clock.touched_rows())
    assert shared is not None and shared["negatives_logits"] == round(4 * m * d * 4 / 1e6, 1)


def test_full_softmax_step_moves_every_row() -> None:
    before, after, _ = _one_step("full")
    assert bool((before[1:] != after[1:]).any(dim=1).all())


def test_cli_writes_results_plot_and_speedups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_png = tmp_path / "steps.json", tmp_path / "steps.png"
    result = run_bench(
        capsys, "train-step", "--items", "300,600", "--samplers", "full,uniform,rff",
        "--towers", "mean", "--repeats", "1", "--batch", "16", "--num-negatives", "32",
        "--history", "5", "--threads", "1", "--out", str(out_json), "--plot", str(out_png),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    payload = record["metrics"]
    assert (record["study"], record["run"]) == (tmp_path.name, "steps")  # named by the file
    assert record["config"]["samplers"] == ["full", "uniform", "rff"]
    cells = {(r["sampler"], r["items"]) for r in payload["results"]}
    assert cells == {(s, n) for s in ("full", "uniform", "rff") for n in (300, 600)}
    assert all(r["ms_per_step"] > 0 and r["batch"] == 16 for r in payload["results"])
    assert set(payload["speedup_vs_full"]) == {"mean n=300", "mean n=600"}
    ms = {(r["sampler"], r["items"]): r["ms_per_step"] for r in payload["results"]}
    assert payload["speedup_vs_full"] == {  # the full softmax's time over each sampler's
        f"mean n={n}": {s: round(ms["full", n] / ms[s, n], 1) for s in ("uniform", "rff")}
        for n in (300, 600)
    }
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_unknown_sampler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_bench(
        capsys, "train-step", "--samplers", "full,nope", "--out", str(tmp_path / "x")
    )
    assert result.returncode == 2
    assert "nope" in result.stderr and "uniform" in result.stderr


def test_cli_refuses_a_bad_tower_before_timing_any_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "steps.json"
    result = run_bench(
        capsys, "train-step", "--items", "300", "--samplers", "full",
        "--towers", "mean,sasrc", "--repeats", "1", "--batch", "8", "--history", "5",
        "--threads", "1", "--out", str(out_json), "--plot", str(tmp_path / "steps.png"),
    )  # fmt: skip
    assert result.returncode == 2 and "tower 'sasrc'" in result.stderr
    assert "ms_per_step" not in result.stderr  # no `mean` cell was timed first
    assert not out_json.exists()


def test_cli_refuses_an_unwritable_result_file_before_the_work(
    blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for option in ("--out", "--plot"):
        result = run_bench(
            capsys, "train-step", "--items", "300", "--samplers", "full",
            "--towers", "mean", "--repeats", "1", "--threads", "1",
            option, str(blocker / "steps.out"),
        )  # fmt: skip
        assert result.returncode == 2 and option in result.stderr


def _tiny_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, samplers: str, *sets: str
) -> dict:
    """The record of `bench train-step` at a tiny setting (B 4, L 5, d 8, m 8) with `--set`s."""
    out_json = tmp_path / "steps.json"
    set_args = [arg for key in sets for arg in ("--set", key)]
    result = run_bench(
        capsys, "train-step", "--items", "300", "--samplers", samplers, "--towers", "mean",
        "--repeats", "1", "--batch", "4", "--num-negatives", "8", "--history", "5", "--dim", "8",
        "--threads", "1", *set_args, "--out", str(out_json), "--plot", str(tmp_path / "steps.png"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(out_json.read_text())


def test_cli_times_the_train_preset_under_set_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _tiny_record(
        capsys, tmp_path, "uniform,rff", "sampler.features=16", "sampler.leaf_size=8"
    )
    assert record["config"]["overrides"] == ["sampler.features=16", "sampler.leaf_size=8"]
    assert record["machine"]["precision"] == "fp32"  # the bench's own, no --set changing it
    uniform, rff = record["metrics"]["results"]
    assert uniform["optimizer"] == rff["optimizer"] == "Adam + SparseAdam (id tables)"
    assert rff["per_query"] is True  # rff's preset, as `recsys train --sampler rff` has it
    assert (rff["features"], rff["leaf_size"]) == (32, 8)  # 2D features; b from --set
    assert (uniform["per_query"], uniform["features"], uniform["leaf_size"]) == (False, None, None)
    for row in (uniform, rff):
        assert row["queries"] == 4 * 5  # a target at every position (train.targets all)
        phases = row["phases_ms"]
        assert set(phases) == {"draw", "sampler_update", "backward", "optimizer",
                               "forward_and_loss"}  # fmt: skip
        assert phases["draw"] > 0 and phases["backward"] > 0
        assert sum(phases.values()) == pytest.approx(row["ms_per_step"], rel=0.05, abs=0.05)
    assert uniform["traffic_mb"]["negatives_logits"] == round(4 * 8 * 8 * 4 / 1e6, 1)  # shared
    assert rff["touched_rows"] > 0 and rff["traffic_mb"]["draw"] > 0
    assert rff["traffic_mb"]["total"] == pytest.approx(
        sum(v for k, v in rff["traffic_mb"].items() if k != "total"), abs=0.3
    )


def test_cli_refuses_a_sampler_key_no_timed_sampler_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_bench(
        capsys, "train-step", "--items", "300", "--samplers", "uniform,rff",
        "--set", "sampler.leaf_sise=8", "--out", str(tmp_path / "steps.json"),
    )  # fmt: skip
    assert result.returncode == 2 and "sampler.leaf_sise=8" in result.stderr


def test_the_record_names_the_precision_and_optimiser_set_overrides_chose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _tiny_record(
        capsys, tmp_path, "full,uniform", "train.precision=bf16", "train.sparse_embeddings=false"
    )
    assert record["machine"]["precision"] == "bf16"
    assert [row["optimizer"] for row in record["metrics"]["results"]] == ["Adam (dense)"] * 2
