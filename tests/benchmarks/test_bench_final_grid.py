"""The final test of the defaults (issue 19, item 4): its runs, and the report's verdicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.harness.paired import mean_interval
from benchmarks.sweeps import sweep
from benchmarks.sweeps.final_grid import PUBLISHED, RECIPE_MODEL, final, final_report
from benchmarks.sweeps.sweep_grid import BEAUTY, TOYS
from tests.benchmarks.helpers import write_record
from training.config import RecsysConfig
from training.config_loading import load_config


def test_the_runs_are_the_recipe_studys_defaults_as_a_user_trained_them_in_30_minutes() -> None:
    specs, planned = final(Path("unused"))
    assert planned == 8 and [(s.dataset, s.name) for s in specs] == [
        (d, name)
        for d in (BEAUTY, TOYS)
        for name in ("full", "uniform_m256", "exact_m64", "midx_m64")
    ]
    cfg = sweep.run_config(specs[1], sweep.Sweep())
    defaults = RecsysConfig()
    assert cfg.train.patience == defaults.train.patience and cfg.train.threads is None
    assert cfg.train.max_minutes == 30 and (cfg.sampler.name, cfg.sampler.num_negatives) == (
        "uniform", 256,
    )  # fmt: skip
    recipe = load_config(overrides=list(RECIPE_MODEL))  # the model the recipe study chose
    assert cfg.model == recipe.model and cfg.model != defaults.model
    assert (cfg.train.lr, cfg.train.targets) == (recipe.train.lr, "all")
    assert sweep.run_config(specs[0], sweep.Sweep()).sampler.name == "full"
    exact = sweep.run_config(specs[2], sweep.Sweep())
    assert (exact.sampler.name, exact.sampler.num_negatives, exact.sampler.per_query) == (
        "exact", 64, True,
    )  # fmt: skip
    assert exact.model == recipe.model and exact.train == cfg.train
    midx = sweep.run_config(specs[3], sweep.Sweep())
    above = defaults.for_catalogue(defaults.sampler.full_up_to + 1)  # the default sampler's pick
    assert midx.sampler == above.sampler  # above its full-softmax limit, at its own m


def test_mean_interval_covers_the_mean_and_narrows_with_more_users() -> None:
    rng = np.random.default_rng(0)
    small, large = rng.random(200), rng.random(20_000)
    mean, low, high = mean_interval(small, 500, 0)
    assert low < mean < high and mean == small.mean()
    _, low_l, high_l = mean_interval(large, 500, 0)
    assert high_l - low_l < (high - low) / 5


def _run(
    out: Path, dataset: str, name: str, ndcg: np.ndarray, precision: str | None = None,
    config: dict[str, object] | None = None, **fields: object,
) -> None:  # fmt: skip
    (out / dataset).mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / dataset / f"{name}.ndcg.npz", ndcg=ndcg)
    metrics = {
        "name": name, "dataset": dataset, "per_user_ndcg": f"{name}.ndcg.npz", "epochs": 12,
        "seconds_per_epoch": 40.0, "stopped_by": "time cap", **fields,
    }  # fmt: skip
    path = out / dataset / f"{name}.json"
    write_record(path, metrics, config, load_before=0.1, load_after=2.0, precision=precision)


def test_the_report_says_which_targets_are_met(tmp_path: Path) -> None:
    # 10% of users hit at rank 0 (NDCG 1): Recall@10 = NDCG@10 = 0.1, above both published
    hits = np.zeros(5000)
    hits[::10] = 1.0
    _run(tmp_path, BEAUTY, "full", hits, precision="bf16", refit_epochs=8)
    _run(tmp_path, BEAUTY, "uniform_m256", hits * 0.5)  # NDCG@10 halved, same hits; fp32
    # recorded before records carried their refit: its config's count
    _run(tmp_path, BEAUTY, "exact_m64", hits, config={"train": {"refit_epochs": 8}})
    _run(tmp_path, BEAUTY, "not_planned", hits)  # another grid's file: not in the report
    text = final_report(tmp_path, resamples=200)
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| amazon")}
    assert list(rows) == ["`full`", "`uniform_m256`", "`exact_m64`"]
    assert rows["`full`"].count(", met") == 2 and "reference" in rows["`full`"]
    sampled = rows["`uniform_m256`"]
    assert "0.1000 (" in sampled and "0.0500 (" in sampled and "not met" in sampled
    assert "-50.0% (-50.0, -50.0), not within 3%" in sampled
    # the precision a run trained in (recorded since `auto`; a record without it: fp32)
    assert "12 x 40 s + 8 refit (bf16), time cap" in rows["`full`"] and "(fp32)" in sampled
    assert "12 x 40 s (fp32)" in sampled  # no refit recorded, none in its config
    assert "12 x 40 s + 8 refit (fp32)" in rows["`exact_m64`"]
    assert str(PUBLISHED[BEAUTY]["ndcg@10"]) in text
