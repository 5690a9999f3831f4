"""studies/paired_ndcg.py, paired_seed_means.py, retrain_plot.py: per-user NDCG, pairs, plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer

from benchmarks.harness.paired import (
    load_per_user,
    paired_interval,
    paired_report,
    per_user_ndcg,
    save_per_user,
)
from benchmarks.studies import paired_seed_means, retrain_plot
from data.synth import generate_events
from tests.benchmarks.helpers import write_record


def test_paired_interval_is_zero_for_a_copy_and_excludes_zero_for_a_clear_gain() -> None:
    paired = paired_interval
    rng = np.random.default_rng(0)
    ref = rng.random(2000)
    assert paired(ref, ref.copy(), 200, 0) == (0.0, 0.0, 0.0)
    rel, low, high = paired(ref, ref * 1.1 + rng.normal(0, 0.01, 2000), 500, 0)
    assert low < rel < high and low > 0.09 and high < 0.11


def test_per_user_ndcg_reproduces_the_bench_quality_metrics(tmp_path: Path) -> None:
    from benchmarks.sweeps.quality import run_quality
    from training.loop.checkpoints import BEST_CHECKPOINT

    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=4).write_csv(log)
    sets = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64"]
    out, home = tmp_path / "q", tmp_path / "home"
    kw = {"enable_progress_bar": False}
    (row,) = run_quality(str(log), ["uniform"], [8], out, None, home, 1, sets, **kw)
    (run,) = [p for p in (home / "runs").iterdir() if p.is_dir()]  # beside: <id>.owner.json
    label, ndcg = per_user_ndcg(run)
    assert label["sampler"] == "uniform" and label["num_negatives"] == 8
    assert ndcg.mean() == pytest.approx(row["ndcg@10"], abs=1e-6)  # the refit model, on test
    kept = run / "checkpoints" / BEST_CHECKPOINT  # the round the run measured on val
    _, val = per_user_ndcg(run, checkpoint=kept, split="val")
    assert val.mean() == pytest.approx(row["val_ndcg@10"], abs=1e-6)
    assert val.mean() != pytest.approx(ndcg.mean(), abs=1e-6)


def test_a_saved_runs_pairs_are_the_runs_own(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    ref, other = rng.random(300), rng.random(300)
    labels = [{"run": "ref", "sampler": "full"}, {"run": "other", "sampler": "uniform"}]
    for label, ndcg in zip(labels, (ref, other), strict=True):
        save_per_user(tmp_path / f"{label['run']}.npz", label, ndcg)
    saved = [load_per_user(tmp_path / f"{name}.npz") for name in ("ref", "other")]
    assert saved[1][0] == labels[1] and np.array_equal(saved[1][1], other)
    report = paired_report(saved[0], saved[1:], resamples=100, seed=3)
    (row,) = report["results"]
    assert (row["vs_reference"], row["ci95_low"], row["ci95_high"]) == paired_interval(
        ref, other, 100, 3
    )
    assert report["reference"] == {**labels[0], "ndcg@10": float(ref.mean())}
    with pytest.raises(ValueError, match="other: 299 test users, reference has 300"):
        paired_report(saved[0], [(labels[1], other[:-1])])


def test_seed_means_pair_each_sides_mean_and_every_seed_pair(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    runs = {name: rng.random(400) for name in ("full42", "full43", "warm42", "warm43")}
    for name, ndcg in runs.items():
        save_per_user(tmp_path / f"{name}.npz", {"run": name}, ndcg)
    paths = {name: tmp_path / f"{name}.npz" for name in runs}
    out = tmp_path / "seeds.json"
    main = paired_seed_means.main
    main([paths["full42"], paths["full43"]], [paths["warm42"], paths["warm43"]], out)
    report = json.loads(out.read_text())["metrics"]
    full = (runs["full42"] + runs["full43"]) / 2
    warm = (runs["warm42"] + runs["warm43"]) / 2
    (row,) = report["results"]
    assert report["reference"]["ndcg@10"] == pytest.approx(full.mean())
    interval = (row["vs_reference"], row["ci95_low"], row["ci95_high"])
    assert interval == pytest.approx(paired_interval(full, warm, 2000, 0))
    pairs = {(Path(p["reference"]).stem, Path(p["other"]).stem): p for p in report["seed_pairs"]}
    assert set(pairs) == {(r, o) for r in ("full42", "full43") for o in ("warm42", "warm43")}
    one = pairs["full43", "warm42"]
    assert (one["vs_reference"], one["ci95_low"], one["ci95_high"]) == pytest.approx(
        paired_interval(runs["full43"], runs["warm42"], 2000, 0)
    )
    save_per_user(tmp_path / "short.npz", {"run": "short"}, rng.random(399))
    with pytest.raises(typer.BadParameter, match="scored on different rows"):
        main([paths["full42"], tmp_path / "short.npz"], [paths["warm42"]], None)
    with pytest.raises(typer.BadParameter, match="scored on different rows"):
        main([paths["full42"]], [tmp_path / "short.npz"], None)  # across the sides too


def test_retrain_plot_draws_a_panel_per_folder(tmp_path: Path) -> None:
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        rounds = [{"round": r, "fit_seconds": 10.0 * r, "val_ndcg@10": 0.01 * r} for r in (1, 2)]
        write_record(folder / "curves.json", {"w": rounds, "f": rounds})
        for run, secs in (("w", 30.0), ("f", 90.0)):
            metrics = {"wall_seconds": secs, "test": {"metrics": {"ndcg@10": 0.05}}}
            write_record(folder / f"{run}.json", metrics)
    out = tmp_path / "plot.png"
    retrain_plot.main([tmp_path / "one", tmp_path / "two"], out, "w", "f")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(FileNotFoundError):  # a folder without the runs named
        retrain_plot.main([tmp_path / "one"], out, "warm", "f")
