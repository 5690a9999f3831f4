"""`bench quality --grid`: one file per run, skipped on rerun, re-run when settings change;
`bench quality-report`: table, paired intervals, plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import records
from benchmarks.sweeps import reuse, run_records, sweep, sweep_grid
from benchmarks.sweeps.sweep_grid import RunSpec
from data.errors import RecsysInputError
from data.synth import generate_events
from tests.benchmarks.helpers import SWEEP_TINY, run_bench

TINY = SWEEP_TINY
SPECS = [RunSpec("tiny", "full", "full", None), RunSpec("tiny", "uniform", "uniform", 8)]


def planner(out: Path) -> tuple[list[RunSpec], int]:
    return SPECS, 3  # one planned run never comes: the report counts it as missing


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> sweep.Sweep:
    root = tmp_path_factory.mktemp("sweep")
    (root / "data" / "tiny").mkdir(parents=True)
    generate_events(150, 80, 2000, seed=4).write_csv(root / "data" / "tiny" / "interactions.csv")
    settings = sweep.Sweep(
        root / "out", root / "data", root / "scratch", [*TINY, "train.max_epochs=2"],
        {"enable_progress_bar": False},
    )  # fmt: skip
    assert sweep.run_sweep(planner, settings) == ["tiny/full", "tiny/uniform_m8"]
    return settings


def test_each_run_writes_its_own_record(swept: sweep.Sweep) -> None:
    full, uni = (run_records.read_row(swept.result_path(s)) for s in SPECS)
    for rec in (full, uni):
        assert 0 <= rec["test"]["ndcg@10"] <= rec["test"]["recall@10"] <= 1
        assert {"mrr@10", "full_ce"} <= rec["test"].keys() and rec["val"]["ndcg@10"] > 0
        assert rec["epochs"] == 2 and rec["seconds_per_epoch"] > 0 and rec["users"] > 100
        assert [c["epoch"] for c in rec["validation"]] == [0, 1]
        assert rec["validation"][1]["time/fit_seconds"] > rec["validation"][0]["time/fit_seconds"]
        assert rec["machine"]["load_before"] >= 0 and rec["config"]["train"]["max_minutes"] == 30
        assert rec["machine"]["precision"] == "fp32" and rec["machine"]["torch_threads"] == 1
        ndcg = run_records.load_ndcg(swept.out, rec)
        assert ndcg.mean() == pytest.approx(rec["test"]["ndcg@10"], abs=1e-9)
    record = records.read(swept.result_path(SPECS[1]))
    assert (record["study"], record["run"]) == ("out", "tiny/uniform_m8")
    assert full["sampling_ms_per_step"] is None and full["proposal_kl"] is None
    assert uni["sampling_ms_per_step"] > 0 and uni["sampling_calls"] > 0
    assert uni["proposal_kl"] > 0 and uni["config"]["sampler"]["num_negatives"] == 8


def test_rerun_skips_unchanged_and_retrains_changed(swept: sweep.Sweep) -> None:
    assert sweep.run_sweep(planner, swept) == []
    full_path, uni_path = (swept.result_path(s) for s in SPECS)
    stored = json.loads(full_path.read_text())
    del stored["config"]["train"]["ema_decay"]  # a key added since: at its default, same
    full_path.write_text(json.dumps(stored))
    changed = json.loads(uni_path.read_text())
    changed["config"]["train"]["lr"] = 0.1  # trained with other settings: run again
    uni_path.write_text(json.dumps(changed))
    assert sweep.run_sweep(planner, swept) == ["tiny/uniform_m8"]
    assert records.read(uni_path)["config"]["train"]["lr"] == 0.003


def test_report_writes_table_intervals_and_plots(swept: sweep.Sweep, tmp_path: Path) -> None:
    from benchmarks.sweeps import sweep_report

    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n{sweep_report.BEGIN}\nold\n{sweep_report.END}\ntail\n")
    report = sweep_report.build_report(swept.out, "none", doc, resamples=200)
    text = doc.read_text()
    assert "old" not in text and text.startswith("# Title") and text.endswith("tail\n")
    assert "2 of 2 planned runs done" in text and "| `full` | - | full softmax |" in text
    gap, low, high = report["runs"]["tiny"]["uniform_m8"]["vs_full"]
    assert low <= gap <= high and report["runs"]["tiny"]["full"]["vs_full"] is None
    assert f"{100 * gap:+.1f}%" in text
    png = swept.out / "tiny" / "comparison.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert records.read(swept.out / "report.json")["metrics"]["done"] == 2


def test_comparison_grid_order_and_bias_stage(tmp_path: Path) -> None:
    specs, planned = sweep_grid.comparison(tmp_path)
    names = [s.name for s in specs]
    assert planned == 41 and len(specs) == 33  # the m = 16 / 256 stage waits for beauty's m = 64
    today = ["full-tau0.1-len20", "rff-tau0.1-len20_m64"]
    assert [s.name for s in specs[-5:]] == ["rff_m16", *today, *today]  # the preset checks, last
    assert [s.dataset for s in specs[-5:]] == ["amazon-toys"] * 3 + ["amazon-beauty"] * 2
    assert names[:6] == ["full", "uniform_m64", "popularity_m64", "tapas-r1_m64", "tapas-r8_m64",
                         "rff_m64"]  # fmt: skip
    assert [s.dataset for s in specs[:22]] == ["amazon-beauty"] * 11 + ["amazon-toys"] * 11
    folder, started = tmp_path / "amazon-beauty", records.start()
    for i, spec in enumerate(sweep_grid.core("amazon-beauty")):
        val = {"val": {"ndcg@10": i / 100}}
        records.save(folder / f"{spec.name}.json", None, val, started, root=tmp_path)
    staged = sweep_grid.bias(tmp_path)
    assert staged is not None and len(sweep_grid.comparison(tmp_path)[0]) == 41
    assert [s.name for s in staged][::2] == ["exact_m16", "quadratic_m16", "bernoulli_m16",
                                             "uniform_m16"]  # fmt: skip
    assert np.all([s.dataset == "amazon-beauty" for s in staged])


def test_cli_grid_mode_and_report(
    swept: sweep.Sweep, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cli import main
    from benchmarks.sweeps.grids import GRIDS

    def run(*args: str) -> tuple[int, str]:
        monkeypatch.setattr("sys.argv", ["recsys", "bench", *args])  # through `recsys bench`
        with pytest.raises(SystemExit) as stop:
            main()
        out = capsys.readouterr()
        return int(stop.value.code or 0), out.out + out.err

    monkeypatch.setitem(GRIDS, "tiny", planner)
    where = ["--out", str(swept.out), "--data-root", str(swept.data_root)]
    code, text = run("quality", "--grid", "tiny", *where, "--scratch", str(swept.scratch),
                     *[f"--set={s}" for s in swept.sets])  # fmt: skip
    assert code == 0 and "trained 0 run(s); 2 of 3 planned runs have results" in text
    code, text = run("quality", "--grid", "nope", *where)
    assert code != 0 and "unknown grid 'nope'" in text
    code, text = run("quality", "--samplers", "uniform")
    assert code != 0 and "--dataset, --samplers and --out" in text
    code, text = run("quality-report", "--out", str(swept.out), "--grid", "tiny")
    assert code == 0 and "2 of 3 planned runs done** (partial)" in text
    report = swept.out / "report.json"
    before = report.read_text()
    code, text = run("quality-report", "--out", str(swept.out), "--grid", "bogus")
    assert code == 2 and "--grid 'bogus': expected one of" in text
    code, text = run(
        "quality-report", "--out", str(swept.out), "--grid", "tiny", "--resamples", "0"
    )
    assert code == 2
    missing = swept.out / "missing.md"
    code, text = run(
        "quality-report", "--out", str(swept.out), "--grid", "tiny", "--doc", str(missing)
    )
    assert code == 2 and "--doc" in text and "cannot read it" in text
    assert report.read_text() == before  # refused before anything was written


def test_cross_table_puts_runs_of_both_datasets_side_by_side() -> None:
    from benchmarks.sweeps.sweep_report import cross_table

    def row(name: str, ndcg: float, gap: tuple[float, float, float] | None) -> dict:
        return {"name": name, "test": {"ndcg@10": ndcg}, "vs_full": gap}

    beauty = [row("full", 0.05, None), row("uniform_m64", 0.04, (-0.2, -0.25, -0.15))]
    toys = [row("full", 0.06, None), row("exact_m64", 0.06, (0.0, -0.01, 0.01))]
    lines = cross_table({"amazon-beauty": beauty, "amazon-toys": toys})
    assert lines[3] == "| run | amazon-beauty | amazon-toys |"
    assert lines[5:] == ["| `full` | 0.0500 | 0.0600 |"]  # uniform: not on toys yet
    assert cross_table({"amazon-beauty": beauty}) == []


def test_every_run_of_the_catalogue_grid_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 1e6-item grid's settings, on a tiny log of the same name (m lowered to fit it)."""
    folder = tmp_path / "data" / sweep_grid.CATALOGUE
    folder.mkdir(parents=True)
    generate_events(120, 90, 1500, seed=6).write_csv(folder / "interactions.csv")
    monkeypatch.setattr(sweep_grid, "CATALOGUE_M", 8)  # the full softmax has no m to set
    settings = sweep.Sweep(
        tmp_path / "out", tmp_path / "data", tmp_path / "scratch",
        [*TINY, "train.max_epochs=1", "train.val_users=30"], {"enable_progress_bar": False},
    )  # fmt: skip
    specs, planned = sweep_grid.catalogue(settings.out)
    assert len(sweep.run_sweep(sweep_grid.catalogue, settings)) == planned == len(specs) == 10
    for spec in specs:
        config = records.read(settings.result_path(spec))["config"]
        assert config["train"]["threads"] == 2 and config["sampler"]["name"] == spec.sampler
        assert config["train"]["sparse_embeddings"] == (spec.sampler != "full")
    rff = next(s for s in specs if s.sampler == "rff")
    assert records.read(settings.result_path(rff))["config"]["sampler"]["leaf_size"] == 32
    two_pass = next(s for s in specs if s.label == "tapas-midx-r8")
    assert records.read(settings.result_path(two_pass))["config"]["sampler"]["first_pass"] == "midx"


# a grid run added but not yet made, by grid
NOT_RUN_YET: dict[str, list[str]] = {}


@pytest.mark.parametrize("grid", ["comparison", "recipe", "catalogue", "midx"])
def test_committed_runs_keep_their_settings_after_a_default_changed(grid: str) -> None:
    """The protocol pins the temperature, precision and stopping window the committed runs used
    (0.05, fp32, each round alone; the defaults are 0.1, auto and 3 since): they are reused,
    not trained again, also those recorded before `train.precision` or the window existed."""
    from benchmarks.sweeps.grids import GRIDS, RESULT_DIRS

    specs, _ = GRIDS[grid](RESULT_DIRS[grid])
    paths = {spec: sweep.Sweep(RESULT_DIRS[grid]).result_path(spec) for spec in specs}
    committed = [spec for spec, path in paths.items() if path.is_file()]
    pending = [spec.name for spec in specs if spec not in committed]
    assert pending == NOT_RUN_YET.get(grid, [])  # every other run of these grids is in
    for spec in committed:
        record = records.read(paths[spec])
        current = reuse.training_settings(sweep.run_config(spec, sweep.Sweep()))
        assert reuse.same_settings(record["config"], current), spec.name


def test_the_report_reads_run_records_only(tmp_path: Path) -> None:
    # a benchmark's own folder of records beside the datasets' is not a dataset of runs
    started = records.start()
    run = records.save(tmp_path / "tiny" / "a.json", {}, {"name": "a", "dataset": "tiny"}, started)
    records.save(tmp_path / "tapas_false_negatives" / "x.json", None, {"share": 0.4}, started)
    (found,) = run_records.load_results(tmp_path)["tiny"]
    assert found == {"name": "a", "dataset": "tiny", "config": {}, "machine": run["machine"]}


def test_a_grid_whose_datasets_are_missing_is_refused_before_anything_trains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch = tmp_path / "scratch"
    done = run_bench(
        capsys, "quality", "--grid", "comparison", "--data-root", str(tmp_path / "none"),
        "--out", str(tmp_path / "out"), "--scratch", str(scratch),
    )  # fmt: skip
    assert done.returncode == 2 and "--data-root" in done.stderr
    assert "amazon-beauty, amazon-toys" in done.stderr and "Traceback" not in done.stderr
    assert not scratch.exists()


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        (["model.nope=1"], "nope"),
        (["loss.name=bernoulli"], "draws with repeats"),
        (["train.devices=2"], "runs in one process"),  # refused per run once ingested, before
    ],
)
def test_a_run_that_could_not_train_stops_the_sweep_before_anything_trains(
    tmp_path: Path, sets: list[str], named: str
) -> None:
    (tmp_path / "data" / "tiny").mkdir(parents=True)
    generate_events(50, 30, 400, seed=4).write_csv(tmp_path / "data" / "tiny" / "interactions.csv")
    settings = sweep.Sweep(tmp_path / "out", tmp_path / "data", tmp_path / "scratch", sets)
    with pytest.raises(RecsysInputError, match=named):
        sweep.run_sweep(planner, settings)
    assert not (tmp_path / "scratch").exists()  # nothing trained


def test_a_missing_result_folder_is_refused_not_reported_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.sweeps import sweep_report

    doc = tmp_path / "doc.md"
    doc.write_text(f"{sweep_report.BEGIN}\nthe committed table\n{sweep_report.END}\n")
    before = doc.read_text()
    for grid in ("comparison", "recipe", "final"):
        out = tmp_path / "typo"
        done = run_bench(
            capsys, "quality-report", "--grid", grid, "--out", str(out), "--doc", str(doc)
        )
        assert done.returncode == 2 and "--out" in done.stderr and str(out) in done.stderr
        assert not out.exists() and doc.read_text() == before


def test_quality_refuses_an_unwritable_result_file_before_training(
    tmp_path: Path, blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.csv"
    generate_events(50, 30, 400, seed=4).write_csv(log)
    args = ["quality", "--dataset", str(log), "--samplers", "uniform", "--max-epochs", "1"]
    args += ["--num-negatives", "8", "--home", str(tmp_path / "home")]
    args += [f"--set={s}" for s in TINY]
    writable = ["--out", str(tmp_path / "q")]
    for chosen in (
        ["--out", str(blocker / "q")],
        [*writable, "--plot", str(blocker / "q.png")],
    ):
        done = run_bench(capsys, *args, *chosen)
        assert done.returncode == 2 and str(blocker) in done.stderr
        assert not (tmp_path / "home").exists()


def test_a_run_that_fails_while_training_is_reported_after_the_others_trained(
    tmp_path: Path,
) -> None:
    for name in ("broken", "tiny"):
        (tmp_path / "data" / name).mkdir(parents=True)
    (tmp_path / "data" / "broken" / "interactions.csv").write_text("not,a,log\n1,2,3\n")
    generate_events(50, 30, 400, seed=4).write_csv(tmp_path / "data" / "tiny" / "interactions.csv")
    specs = [RunSpec("broken", "full", "full", None), RunSpec("tiny", "full", "full", None)]
    settings = sweep.Sweep(
        tmp_path / "out", tmp_path / "data", tmp_path / "scratch", [*TINY, "train.max_epochs=1"],
        {"enable_progress_bar": False},
    )  # fmt: skip
    with pytest.raises(sweep.SweepRunsFailedError, match="1 run.*broken/full.*1 trained"):
        sweep.run_sweep(lambda out: (specs, 2), settings)
    assert settings.result_path(specs[1]).is_file() and not settings.result_path(specs[0]).exists()


def test_quality_refuses_several_processes_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def train(*args: object, **kwargs: object) -> None:
        raise AssertionError("trained: several processes hang or crash here")

    monkeypatch.setattr("training.workflows.pipeline.train", train)
    log = tmp_path / "log.csv"
    generate_events(50, 30, 400, seed=4).write_csv(log)
    args = ["quality", "--dataset", str(log), "--samplers", "uniform,full"]
    args += ["--num-negatives", "8", "--out", str(tmp_path / "q"), "--set=train.devices=2"]
    done = run_bench(capsys, *args)
    assert done.returncode == 2 and "runs in one process" in done.stderr
    assert list((tmp_path / "q").glob("*.json")) == []
