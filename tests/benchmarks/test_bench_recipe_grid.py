"""The recipe study: stage 1, the combined recipe from validation, no test split; the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import RESULTS
from benchmarks.sweeps import recipe_grid, sweep
from benchmarks.sweeps.recipe_grid import DATASETS, RECIPES, combined_sets, recipe
from benchmarks.sweeps.recipe_report import DEFAULT_DOC, PLOT, recipe_report, recipe_table
from benchmarks.sweeps.sweep_grid import RunSpec
from data.synth import generate_events
from tests.benchmarks.helpers import run_bench, write_record

VAL = {"defaults": 0.050, "cosine": 0.060, "cosine-warmup": 0.058, "d128": 0.052, "tau-0.1": 0.04}


def _write(out: Path, name: str, val: float, datasets: tuple[str, ...] = DATASETS) -> None:
    for dataset in datasets:
        (out / dataset).mkdir(parents=True, exist_ok=True)
        curve = [{"epoch": e, "time/fit_seconds": 60.0 * (e + 1), "val/ndcg@10": val * e / 8}
                 for e in range(9)]  # fmt: skip
        metrics = {
            "name": name, "val": {"ndcg@10": val}, "seconds_per_epoch": 60.0, "epochs": 9,
            "stopped_by": "time cap", "validation": curve,
        }  # fmt: skip
        write_record(out / dataset / f"{name}.json", metrics, load_before=1.0, load_after=2.0)


def test_the_combined_recipe_takes_whole_every_recipe_that_beat_the_defaults_on_both(
    tmp_path: Path,
) -> None:
    specs, planned = recipe(tmp_path)
    assert all("train.max_minutes=20" in s.sets for s in specs)
    stage_one, checks = specs[: 2 * len(RECIPES)], specs[2 * len(RECIPES) :]
    assert all(s.sampler == "full" for s in stage_one) and planned == len(specs) + 2
    later = len(recipe_grid.DEFAULTS_PLUS) + len(recipe_grid.SMALL_SAMPLED)
    checks = checks[: -2 * later]  # stages 8 to 12: their own tests
    n_sampled, n_seeds = 2 * len(recipe_grid.SAMPLED_CHECK), 2 * len(recipe_grid.SEED_CHECK)
    sampled, seeds = checks[:n_sampled], checks[n_sampled : n_sampled + n_seeds]
    n_pairs = 2 * len(recipe_grid.TEMPERATURE_PAIRS)
    budget, logits = checks[n_sampled + n_seeds : -4 - n_pairs], checks[-4 - n_pairs : -n_pairs]
    pairs = checks[-n_pairs:]
    assert [(s.dataset, s.name, s.sampler, s.sets[1:]) for s in pairs] == [
        (d, f"tau-0.1-{name}", "full", ("model.temperature=0.1", *RECIPES[name]))
        for name in recipe_grid.TEMPERATURE_PAIRS for d in DATASETS
    ]  # fmt: skip
    assert [(s.dataset, s.name) for s in budget] == [  # amazon-beauty first: none ran there yet
        (DATASETS[0], name) for name in recipe_grid.BUDGET_SCHEDULES
    ]
    dot = ("model.normalize=false", "model.temperature=1.0")
    assert [(s.dataset, s.name, s.sampler, s.sets[1:]) for s in logits] == [
        *[(d, "dot-product", "full", dot) for d in DATASETS],
        *[(d, "dot-product-uniform_m256", "uniform", dot) for d in DATASETS],
    ]
    assert [(s.dataset, s.name, s.sampler, s.m, s.sets[1:]) for s in sampled] == [
        (d, f"{name}-uniform_m256", "uniform", 256, RECIPES[name])
        for name in recipe_grid.SAMPLED_CHECK for d in DATASETS
    ]  # fmt: skip
    assert [(s.dataset, s.name, s.sampler, s.sets[1:]) for s in seeds] == [
        (d, f"{name}-seed43", "full", (*RECIPES[name], "train.seed=43"))
        for d in DATASETS for name in recipe_grid.SEED_CHECK
    ]  # fmt: skip
    for name in RECIPES:
        _write(tmp_path, name, VAL.get(name, 0.045))
    _write(tmp_path, "heads-1", 0.07, DATASETS[:1])  # its mean beats the defaults, toys does not
    # cosine-warmup shares lr_schedule with the better cosine: it stays out whole, warm-up too;
    # heads-1 does not hold on every dataset
    assert combined_sets(tmp_path) == ("train.lr_schedule=cosine", "model.dim=128")
    specs, _ = recipe(tmp_path)
    extra = specs[2 * len(RECIPES) : 2 * len(RECIPES) + 2]
    assert [(s.dataset, s.name) for s in extra] == [
        (DATASETS[0], "combined"), (DATASETS[1], "combined"),
    ]  # fmt: skip
    table = recipe_table(tmp_path).splitlines()
    assert (
        table[2]
        == "| cosine | 0.0600 | 0.0600 | 0.0600 | "
        + " | ".join(["9 x 60 s, cap, load 1.0/2.0"] * len(DATASETS))
        + " |"
    )
    assert table[-1].startswith("| tau-0.1 |")


def test_stages_8_to_11_and_15_add_ffn_adamw_size_ema_lr_and_a_tau_schedule_to_the_defaults(
    tmp_path: Path,
) -> None:
    specs, _ = recipe(tmp_path)
    chosen = ("train.max_minutes=20", "model.temperature=0.1", "model.max_len=20")
    wide = "model.ffn_dim=1024"  # 4 d at the recipe study's d = 256
    adamw = ("train.weight_decay=0.1", "train.decoupled_weight_decay=true")
    small = ("model.dim=64", "model.num_layers=1", "model.num_heads=1", "model.dropout=0.2")
    ema, lr = "train.ema_decay=0.999", "train.lr=0.006"
    scheduled = ("model.temperature=0.2", "model.temperature_final=0.05", "model.max_len=20")
    assert [(s.dataset, s.name, s.sampler, s.sets) for s in specs[-16:-4]] == [
        (DATASETS[0], "tau-0.1-len-20-ffn-4x", "full", (*chosen, wide)),
        (DATASETS[1], "tau-0.1-len-20-ffn-4x", "full", (*chosen, wide)),
        (DATASETS[0], "tau-0.1-len-20-adamw-0.1", "full", (*chosen, *adamw)),
        (DATASETS[1], "tau-0.1-len-20-adamw-0.1", "full", (*chosen, *adamw)),
        (DATASETS[0], "tau-0.1-len-20-esasrec-size", "full", (*chosen, *small)),
        (DATASETS[1], "tau-0.1-len-20-esasrec-size", "full", (*chosen, *small)),
        (DATASETS[0], "tau-0.1-len-20-ema", "full", (*chosen, ema)),
        (DATASETS[1], "tau-0.1-len-20-ema", "full", (*chosen, ema)),
        (DATASETS[0], "tau-0.1-len-20-lr-6e-3", "full", (*chosen, lr)),
        (DATASETS[1], "tau-0.1-len-20-lr-6e-3", "full", (*chosen, lr)),
        (DATASETS[0], "tau-0.2-to-0.05-len-20", "full", (chosen[0], *scheduled)),
        (DATASETS[1], "tau-0.2-to-0.05-len-20", "full", (chosen[0], *scheduled)),
    ]


def test_a_recipe_of_stages_8_to_11_that_beat_the_defaults_on_both_runs_with_the_second_seed(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "tau-0.1-len-20", 0.0655)
    _write(tmp_path, "tau-0.1-len-20-ema", 0.0660)  # ahead on both
    _write(tmp_path, "tau-0.1-len-20-ffn-4x", 0.0660, DATASETS[:1])
    _write(tmp_path, "tau-0.1-len-20-ffn-4x", 0.0650, DATASETS[1:])  # ahead on one only
    specs, planned = recipe(tmp_path)
    seeds = [s for s in specs if s.name.endswith("-seed43") and s.name.startswith("tau-0.1-len")]
    assert [(s.dataset, s.name, s.sets[-2:]) for s in seeds] == [
        (d, "tau-0.1-len-20-ema-seed43", ("train.ema_decay=0.999", "train.seed=43"))
        for d in DATASETS
    ]
    assert planned == recipe(tmp_path / "none")[1] + 2


def test_stage_12_trains_the_esasrec_size_sampled_and_seeds_again_what_beat_the_full_softmax(
    tmp_path: Path,
) -> None:
    small = ("model.dim=64", "model.num_layers=1", "model.num_heads=1", "model.dropout=0.2")
    chosen = ("model.temperature=0.1", "model.max_len=20", *small, "train.patience=50")
    published = ("model.temperature=0.1", *small, "train.lr=0.001", "train.patience=50")
    specs, planned = recipe(tmp_path)
    rows = [(s.dataset, s.name, s.sampler, s.m, s.sets[1:]) for s in specs[-4:]]
    assert rows == [
        (d, f"{name}-uniform_m256", "uniform", 256, sets)
        for name, sets in (("tau-0.1-len-20-esasrec-size-patience-50", chosen),
                           ("tau-0.1-esasrec-settings", published))
        for d in DATASETS
    ]  # fmt: skip
    _write(tmp_path, "tau-0.1-len-20", 0.0655)
    _write(tmp_path, "tau-0.1-len-20-esasrec-size-patience-50-uniform_m256", 0.0660)
    _write(tmp_path, "tau-0.1-esasrec-settings-uniform_m256", 0.0650)
    specs, seeded = recipe(tmp_path)
    assert [(s.dataset, s.name, s.sampler, s.sets[-1]) for s in specs[-2:]] == [
        (d, "tau-0.1-len-20-esasrec-size-patience-50-seed43-uniform_m256", "uniform",
         "train.seed=43")
        for d in DATASETS
    ]  # fmt: skip
    assert seeded == planned + 2


def test_a_budget_schedule_runs_on_amazon_toys_only_if_it_beat_tau_0_1_on_amazon_beauty(
    tmp_path: Path,
) -> None:
    beaten, behind = recipe_grid.BUDGET_SCHEDULES  # the two schedules, in the grid's order
    _write(tmp_path, "tau-0.1", 0.0649, DATASETS[:1])
    _write(tmp_path, beaten, 0.0650, DATASETS[:1])
    _write(tmp_path, behind, 0.0646, DATASETS[:1])
    specs = recipe_grid.budget_checks(tmp_path)
    assert [(s.dataset, s.name) for s in specs] == [
        (DATASETS[0], beaten), (DATASETS[0], behind), (DATASETS[1], beaten),
    ]  # fmt: skip
    assert specs[-1].sets == ("train.max_minutes=20", *recipe_grid.BUDGET_SCHEDULES[beaten])


def test_the_table_names_what_stopped_each_run(tmp_path: Path) -> None:
    _write(tmp_path, "defaults", 0.05)
    for dataset, stopped in zip(DATASETS, ("max epochs", "early stopping"), strict=True):
        record = json.loads((tmp_path / dataset / "defaults.json").read_text())
        record["metrics"]["stopped_by"] = stopped
        (tmp_path / dataset / "defaults.json").write_text(json.dumps(record))
    row = recipe_table(tmp_path).splitlines()[2]
    assert row.endswith("| 9 x 60 s, max epochs, load 1.0/2.0 | 9 x 60 s, early, load 1.0/2.0 |")


def test_the_report_plots_every_recipe_against_time_and_links_the_plot(tmp_path: Path) -> None:
    out = tmp_path / "recipe_study"
    for name in ("defaults", "cosine"):
        _write(out, name, VAL[name])
    text = recipe_report(out, doc=tmp_path / "docs" / "study.md")
    assert (out / PLOT).stat().st_size > 10_000
    assert text.splitlines()[2].startswith("| cosine |")
    assert f"(../recipe_study/{PLOT})" in text  # from the doc's folder to the plot
    committed = options.doc_link(RESULTS / "recipe_study" / PLOT, DEFAULT_DOC)
    assert committed == f"../benchmarks/results/recipe_study/{PLOT}"  # without --doc: its doc's


def test_a_validation_only_sweep_never_ranks_the_test_split(tmp_path: Path) -> None:
    (tmp_path / "data" / "tiny").mkdir(parents=True)
    generate_events(100, 60, 1200, seed=8).write_csv(
        tmp_path / "data" / "tiny" / "interactions.csv"
    )
    tiny = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.max_epochs=1"]
    settings = sweep.Sweep(
        tmp_path / "out", tmp_path / "data", tmp_path / "scratch", tiny,
        {"enable_progress_bar": False}, test=False,
    )  # fmt: skip
    spec = RunSpec("tiny", "cosine", "full", None, sets=recipe_grid.RECIPES["cosine"])
    assert sweep.run_sweep(lambda out: ([spec], 1), settings) == ["tiny/cosine"]
    record = records.read(settings.result_path(spec))
    run = record["metrics"]
    assert run["test"] is None and run["per_user_ndcg"] is None
    assert run["val"]["ndcg@10"] > 0.0 and record["config"]["train"]["lr_schedule"] == "cosine"
    assert not list((tmp_path / "out" / "tiny").glob("*.npz"))


def test_the_report_command_links_the_plot_from_where_the_doc_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.sweeps.sweep_report import BEGIN, END

    out, doc = tmp_path / "results" / "study", tmp_path / "notes" / "deep" / "recipe.md"
    _write(out, "defaults", VAL["defaults"])
    doc.parent.mkdir(parents=True)
    doc.write_text(f"{BEGIN}\n{END}\n")
    args = ["quality-report", "--grid", "recipe", "--out", str(out), "--doc", str(doc)]
    done = run_bench(capsys, *args)
    assert done.returncode == 0, done.stderr
    assert f"![recipe study](../../results/study/{PLOT})" in doc.read_text()
