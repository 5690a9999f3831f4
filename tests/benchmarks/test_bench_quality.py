"""`bench quality` without a grid: one record per (sampler, m), resumed; the best round's KL."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks import records
from benchmarks.harness.curves import best_epoch_kl
from benchmarks.sweeps.quality import run_quality
from data.errors import RecsysInputError
from data.synth import generate_events
from training.precision import resolve_precision


def test_bench_quality_writes_a_record_per_run_a_plot_and_resumes(tmp_path: Path) -> None:
    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=4).write_csv(log)
    sets = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64"]
    out, png, home = tmp_path / "q", tmp_path / "q.png", tmp_path / "home"
    kw = {"enable_progress_bar": False}
    rows = run_quality(str(log), ["full", "uniform"], [8], out, png, home, 1, sets, **kw)
    assert [(r["sampler"], r["num_negatives"]) for r in rows] == [("full", None), ("uniform", 8)]
    for row, name in zip(rows, ("full", "uniform_m8"), strict=True):
        record = records.read(out / f"{name}.json")
        assert record["metrics"] == row and (record["study"], record["run"]) == ("q", name)
        assert record["config"]["max_epochs"] == 1 and record["config"]["overrides"] == sets
        machine = record["machine"]
        assert machine["precision"] == resolve_precision("auto", torch.device(machine["device"]))
        assert 0 <= row["ndcg@10"] <= row["recall@10"] <= 1 and row["full_ce"] > 0
        assert row["epochs"] == 1 and row["seconds_per_epoch"] > 0
        assert [v["epoch"] for v in row["validation"]] == [0]
    assert rows[0]["validation"][0]["val/ndcg@10"] == pytest.approx(rows[0]["val_ndcg@10"])
    assert rows[1]["validation"][0]["val/proposal_kl"] > 0  # uniform is log n - H(p) away
    assert best_epoch_kl(rows[1]) == rows[1]["validation"][0]["val/proposal_kl"]
    assert best_epoch_kl(rows[0]) is None  # full softmax draws nothing
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    first = (out / "full.json").read_text()
    again = run_quality(str(log), ["full", "uniform"], [8, 16], out, None, home, 1, sets, **kw)
    assert len(again) == 3 and again[2]["num_negatives"] == 16
    assert again[:2] == rows and (out / "full.json").read_text() == first  # kept, not redone
    with pytest.raises(RecsysInputError, match="'max_epochs': 1}, not {'max_epochs': 2}"):
        run_quality(str(log), ["uniform"], [8], out, None, home, 2, sets, **kw)  # other settings
    for bad in ("[]", "\xff"):
        (tmp_path / "bad").mkdir(exist_ok=True)
        (tmp_path / "bad" / "x.json").write_text(bad, encoding="latin-1")
        with pytest.raises(RecsysInputError, match="x.json: not a result record"):
            run_quality(str(log), ["uniform"], [8], tmp_path / "bad", None, home, 1, sets)


def test_best_epoch_kl_is_read_at_the_best_validation_round() -> None:
    curve = [
        {"epoch": 0, "val/ndcg@10": 0.01, "val/proposal_kl": 5.0},
        {"epoch": 1, "val/ndcg@10": 0.03, "val/proposal_kl": 3.0},
        {"epoch": 2, "val/ndcg@10": 0.02, "val/proposal_kl": 2.0},
    ]
    assert best_epoch_kl({"validation": curve}) == 3.0
    assert best_epoch_kl({"validation": [{"epoch": 0, "val/ndcg@10": 0.1}]}) is None
    gap = {"validation": [{"val/ndcg@10": 0.1, "val/proposal_kl": 2.0}, {"val/ndcg@10": 0.2}]}
    assert best_epoch_kl(gap) is None  # the best round's KL, not another round's
