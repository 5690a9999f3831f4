"""`recsys tune`: trials on the validation split, the table, best.yaml, resuming, pruning."""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from data.errors import RecsysInputError
from data.synth import generate_events
from data.workspace import Workspace
from training.config import RecsysConfig
from training.config_loading import build_run_config, load_config
from training.loop.checkpoints import MONITOR
from training.loop.trainer import fit
from training.workflows.pipeline import load_splits
from training.workflows.tune import (
    SEARCH_SPACE,
    TuneRequest,
    best_settings,
    minutes_spent,
    open_study,
    trial_config,
    tune,
)
from training.workflows.tune_pruning import PruneOnValidation, TrialCallbacks
from training.workflows.tune_study import MINUTES_RUN

QUICK = ["--set", "train.max_epochs=2", "--set", "eval.ks=[10,20]", "--set", "model.max_len=10"]
OWN = {"model.tower.num_layers", "model.tower.num_heads", "model.tower.alpha", "model.tower.cutoff"}
SEARCHED = (set(SEARCH_SPACE) | OWN) - {
    "model.max_len",
    "model.temperature",
    "model.learn_temperature",
}  # the default tower's own keys are searched; a key given with --set is not, nor the
# temperature of dot-product logits, which learn their own scale
COSINE = {"normalize": True, "temperature": 0.1}  # what the kernel samplers' flag brings


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tune") / "events.csv"
    generate_events(100, 50, 1000, seed=5).write_csv(path)
    return path


def _two_trials(run_cli, log_file: Path, home: Path, *extra: str):
    """`recsys tune` of two trials in a minute on the tiny log, with `extra` arguments."""
    return run_cli(
        "tune", "--dataset", str(log_file), "--trials", "2", "--budget-minutes", "1", *QUICK,
        *extra, home=home,
    )  # fmt: skip


def test_tune_writes_every_trial_and_a_best_config_that_train_reads(
    run_cli, log_file: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    done = _two_trials(run_cli, log_file, home)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["trial", "state", "val"] and len(lines) == 4
    summary = json.loads((home / "tune" / "trials.json").read_text())
    assert [t["number"] for t in summary["trials"]] == [0, 1]
    for trial in summary["trials"]:
        assert set(trial["params"]) == SEARCHED and trial["config"]["model"]["max_len"] == 10
        assert trial["state"] in ("complete", "pruned") and trial["config"] is not None
        assert trial["config"]["train"]["max_minutes"] <= 1 / 2
    complete = [t for t in summary["trials"] if t["state"] == "complete"]
    best = max(complete, key=lambda t: t["val_ndcg@10"])
    assert summary["best"] == {"number": best["number"], "val_ndcg@10": best["val_ndcg@10"]}
    assert lines[-1].startswith(f"best: trial {best['number']}, val ndcg@10")
    cfg = load_config([home / "tune" / "best.yaml"], [])
    for key, value in best["params"].items():
        node = cfg
        for part in key.split("."):
            node = getattr(node, part)
        assert node == value
    assert cfg.train.max_epochs == 2 and cfg.model.max_len == 10
    assert cfg.train.max_minutes is None  # the trial's cap is not kept
    trained = run_cli("train", "--config", str(home / "tune" / "best.yaml"), "--json", home=home)
    assert trained.returncode == 0, trained.stderr
    val = json.loads(trained.stdout)["metrics"]["val"]["ndcg@10"]
    # the pruner spares its first two trials (n_startup_trials=2): both complete, and the
    # config written beats the other one's settings
    worst = min(t["val_ndcg@10"] for t in complete)
    assert len(complete) == 2 and val > worst
    assert val == pytest.approx(best["val_ndcg@10"], abs=1e-6)  # same seed

    again = run_cli("tune", "--trials", "3", "--budget-minutes", "2", "--json", *QUICK, home=home)
    assert again.returncode == 0, again.stderr
    assert [t["number"] for t in json.loads(again.stdout)["trials"]] == [0, 1, 2]


def test_a_trial_fills_its_cap_with_its_fit_and_reserves_nothing_for_a_refit(
    log_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import training.loop.trainer as trainer_module

    fits = []

    def spy(*args, **kwargs):
        fits.append(fit(*args, **kwargs))
        return fits[-1]

    monkeypatch.setattr(trainer_module, "fit", spy)
    home = Workspace(tmp_path / "home")
    # neither epochs nor early stopping end it first: only the cap does
    base = build_run_config(
        overrides=["train.max_epochs=10000", "train.patience=100000", "eval.ks=[10]"]
    )
    assert base.train.refit_epochs > 0  # what train would reserve room for under its cap
    cap = 0.1
    tune(home, TuneRequest(base, home.root / "tune", cap, 1), dataset=str(log_file))
    (fitted,) = fits
    assert fitted.refit_epochs == 0
    assert fitted.seconds >= 0.9 * 60 * cap  # the timer stopped it at its cap, not a third sooner


def test_a_trial_cut_short_is_failed_and_its_settings_run_first(tmp_path: Path) -> None:
    request = TuneRequest(RecsysConfig(), tmp_path, budget_minutes=60.0, trials=4)
    study = open_study(request)
    killed = study.ask()
    params = {key: suggest(killed, key) for key, suggest in SEARCH_SPACE.items()}
    resumed = open_study(request)  # as a new sitting after a kill would
    states = [t.state for t in resumed.get_trials()]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    retry = resumed.ask()
    assert {key: suggest(retry, key) for key, suggest in SEARCH_SPACE.items()} == params


def _proposals(study: optuna.Study, count: int, start: int = 0) -> list[dict[str, object]]:
    """Trials `start` to `start + count` of `study`, told scores (every third pruned); the
    settings each was proposed."""
    proposed = []
    for number in range(start, start + count):
        trial = study.ask()
        proposed.append({key: suggest(trial, key) for key, suggest in SEARCH_SPACE.items()})
        if number % 3 == 2:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, 0.01 * (number % 5))
    return proposed


def _request(out: Path) -> TuneRequest:
    return TuneRequest(RecsysConfig(), out, budget_minutes=60.0, trials=12, seed=3)


def test_a_search_in_sittings_proposes_what_one_sitting_would(tmp_path: Path) -> None:
    at_once = _proposals(open_study(_request(tmp_path / "once")), 12)  # past TPE's 10 random
    apart = [p for n in range(12) for p in _proposals(open_study(_request(tmp_path)), 1, n)]
    assert apart == at_once and len({str(p) for p in at_once}) == 12  # not the first again


@pytest.mark.parametrize("drew", [True, False])
def test_a_search_killed_in_a_trial_goes_on_as_one_sitting_would(
    tmp_path: Path, drew: bool
) -> None:
    at_once = _proposals(open_study(_request(tmp_path / "once")), 4)
    killed = open_study(_request(tmp_path))
    first = _proposals(killed, 1)
    cut = killed.ask()  # the second trial, killed after its draws or before any
    if drew:
        {key: suggest(cut, key) for key, suggest in SEARCH_SPACE.items()}
    second = _proposals(open_study(_request(tmp_path)), 1, 1)  # its retry, first of the sitting
    assert first + second + _proposals(open_study(_request(tmp_path)), 2, 2) == at_once


def test_a_killed_trial_counts_the_minutes_it_ran_not_those_until_the_resume(
    tmp_path: Path,
) -> None:
    request = TuneRequest(RecsysConfig(), tmp_path, budget_minutes=60.0, trials=4)
    killed = open_study(request).ask()
    trainer = SimpleNamespace(
        callback_metrics={MONITOR: 0.1}, sanity_checking=False, current_epoch=0
    )
    PruneOnValidation(killed).on_validation_end(trainer, None)  # its one report, then the kill
    yesterday = (datetime.now() - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S.%f")
    with closing(sqlite3.connect(tmp_path / "study.db")) as db, db:  # it started a day ago
        db.execute("UPDATE trials SET datetime_start = ?", (yesterday,))
    resumed = open_study(request)  # the next day
    assert resumed.trials[0].state == optuna.trial.TrialState.FAIL
    assert minutes_spent(resumed) < 1.0  # not the 1,440 minutes from its start to the resume


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        (["--set", "model.max_len=20"], "model.max_len: 10 in the study, 20 now"),
        (["--set", "model.max_len=10", "--set", "train.max_epochs=3"], "train.max_epochs"),
    ],
)
def test_resuming_a_study_with_other_settings_is_refused(
    run_cli, tmp_path: Path, sets: list[str], named: str
) -> None:
    home = tmp_path / "home"
    base = build_run_config(overrides=["model.max_len=10"])
    first = TuneRequest(base, home / "tune", 1.0, 2, fixed=frozenset({"model.max_len"}))
    study = open_study(first)
    study.tell(study.ask(), 0.01)  # a trial of the first settings
    done = run_cli("tune", "--budget-minutes", "1", *sets, "--json", home=home)
    assert done.returncode == 2 and done.stdout == ""
    assert named in done.stderr and "another --out" in done.stderr


def test_a_study_without_trials_takes_the_new_settings(tmp_path: Path) -> None:
    base = build_run_config()
    other = build_run_config(overrides=["train.max_epochs=3"])
    open_study(TuneRequest(base, tmp_path, 1.0, 2))  # e.g. a sitting stopped by a bad dataset
    study = open_study(TuneRequest(other, tmp_path, 1.0, 2))  # no trial ran: taken, not refused
    assert study.user_attrs["search"]["base"]["train.max_epochs"] == 3


def test_a_study_from_before_a_key_existed_is_refused_naming_the_key(tmp_path: Path) -> None:
    """Its trials ran with whatever the code did before the key (each round alone for early
    stopping, before `train.patience_window`): new trials with today's might mix two rules."""
    base = build_run_config()
    study = open_study(TuneRequest(base, tmp_path, 1.0, 2))
    stored = study.user_attrs["search"]
    del stored["base"]["train.patience_window"]  # as if written before the key existed
    stored["base"]["train.gone_key"] = 1  # a key removed since: no difference
    study.set_user_attr("search", stored)
    study.tell(study.ask(), 0.01)
    message = r"train.patience_window: not in the study \(older than the key\), 3 now\)"
    with pytest.raises(RecsysInputError, match=message):
        open_study(TuneRequest(base, tmp_path, 1.0, 2))


def test_a_retrain_setting_changed_since_the_study_is_no_change(tmp_path: Path) -> None:
    """The retrain section shapes no trial (say `retrain.patience`'s default changed)."""
    base = build_run_config()
    study = open_study(TuneRequest(base, tmp_path, 1.0, 2))
    stored = {**study.user_attrs["search"]}
    stored["base"] = {**stored["base"], "retrain.patience": 3}  # as a study before it recorded
    study.set_user_attr("search", stored)
    study.tell(study.ask(), 0.01)
    other = build_run_config(overrides=["retrain.patience=2"])
    assert open_study(TuneRequest(other, tmp_path, 1.0, 2)).user_attrs["search"] == stored


def test_a_sampler_built_on_the_starting_temperature_leaves_learning_it_out() -> None:
    cosine = ["model.normalize=true", "model.temperature=0.1"]
    fixed = (("quadratic", False), ("exact", False), ("uniform", True), ("auto", False))  # midx
    for sampler, searched in fixed:
        base = build_run_config(overrides=cosine, sampler=sampler)
        space = TuneRequest(base, Path("unused"), 1.0, 2).space()
        assert ("model.learn_temperature" in space) == searched, sampler
        assert "model.temperature" in space
    plain = TuneRequest(build_run_config(sampler="uniform"), Path("unused"), 1.0, 2).space()
    assert not {"model.temperature", "model.learn_temperature"} & set(plain)  # dot products


@pytest.mark.parametrize(
    ("sampler", "sets", "written"),
    [
        (None, [], {}),
        (
            "rff",
            ["sampler.leaf_size=64"],
            {"sampler": {"name": "rff", "leaf_size": 64}, "model": COSINE},
        ),
        (
            "quadratic",
            [],
            {
                "sampler": {"name": "quadratic"},
                "loss": {"name": "absolute_softmax"},
                "model": COSINE,
            },
        ),
    ],
)
def test_best_yaml_keeps_what_differs_from_the_samplers_own_defaults(
    sampler: str | None, sets: list[str], written: dict
) -> None:
    base = build_run_config(overrides=sets, sampler=sampler)
    best = SimpleNamespace(params={"train.lr": 0.01})
    diff = best_settings(best, base)  # type: ignore[arg-type]
    assert diff == {**written, "train": {"lr": 0.01}}
    again = build_run_config(base=diff)  # `recsys train --config best.yaml`
    assert (again.sampler, again.loss, again.train.lr) == (base.sampler, base.loss, 0.01)


def test_the_callback_stops_a_real_fit_when_the_pruner_says_so(ws: Workspace, log_file: Path):
    from data.datasets import prepare_dataset

    prepare_dataset(ws, str(log_file))
    cfg = load_config([], ["model.dim=16", "model.num_layers=1", "train.max_epochs=5"])
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.ThresholdPruner(2.0))
    trial = study.ask()
    with pytest.raises(optuna.TrialPruned, match=r"at round 0 \(epoch 0\)"):
        start = TrialCallbacks(PruneOnValidation(trial))
        fit(cfg, load_splits(ws, cfg), ws.runs_dir / "t", start=start)
    assert list(study.trials[0].intermediate_values) == [0]


def test_rounds_every_n_steps_report_one_step_each(ws: Workspace, log_file: Path) -> None:
    from data.datasets import prepare_dataset

    prepare_dataset(ws, str(log_file))
    sets = ["model.dim=16", "model.num_layers=1", "train.max_epochs=1", "train.val_every_steps=1"]
    sets.append("train.batch_size=8")  # several steps in the one epoch
    cfg = load_config([], sets)
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    start = TrialCallbacks(PruneOnValidation(trial))
    fit(cfg, load_splits(ws, cfg), ws.runs_dir / "t", start=start)
    steps = list(study.trials[0].intermediate_values)
    assert len(steps) >= 2 and steps == list(range(len(steps)))  # all in epoch 0, none lost
    assert study.trials[0].user_attrs["minutes_run"] > 0  # kept at each report


@pytest.mark.parametrize("budget", ["0", "nan", "inf"])
def test_bad_budget_is_exit_2(run_cli, tmp_path: Path, budget: str) -> None:
    done = run_cli("tune", "--budget-minutes", budget, "--json", home=tmp_path)
    assert done.returncode == 2 and "--budget-minutes" in done.stderr
    assert done.stdout == ""  # no NaN or Infinity printed as JSON


def test_a_diverging_trial_is_pruned_and_the_search_goes_on(
    run_cli, log_file: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    done = _two_trials(run_cli, log_file, home, "--set", "train.lr=1e30", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [t["state"] for t in summary["trials"]] == ["pruned", "pruned"]  # both ran
    assert summary["best"] is None and "training diverged" in done.stderr


@pytest.mark.parametrize("out", ["a-file", "a-file/study"])
def test_an_out_that_is_not_a_folder_is_refused_before_the_lock(
    run_cli, tmp_path: Path, out: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    home = tmp_path / "home"
    done = run_cli("tune", "--budget-minutes", "1", "--out", str(tmp_path / out), home=home)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"--out {tmp_path / out}: {tmp_path / 'a-file'} is not a folder" in done.stderr
    assert not home.exists()  # no lock taken


def test_a_trial_ended_by_ctrl_c_runs_its_settings_first_next_sitting(
    ws: Workspace, log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ctrl_c(*args: object) -> None:
        raise KeyboardInterrupt  # inside the fit: Lightning catches it and calls sys.exit(1)

    monkeypatch.setattr(PruneOnValidation, "on_train_start", ctrl_c)
    request = TuneRequest(RecsysConfig(), ws.tune_dir, budget_minutes=1.0, trials=2)
    with pytest.raises(KeyboardInterrupt):
        tune(ws, request, str(log_file))
    study = open_study(request)  # the next sitting
    interrupted, retry = study.get_trials()
    assert (interrupted.state, retry.state) == (
        optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING,
    )  # fmt: skip
    asked = study.ask()
    assert {key: suggest(asked, key) for key, suggest in request.space().items()} == (
        interrupted.params
    )


def test_a_study_that_spent_its_budget_says_so_instead_of_running_nothing_silently(
    ws: Workspace, log_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    request = TuneRequest(RecsysConfig(), ws.tune_dir, budget_minutes=1.0, trials=3)
    spent = open_study(request).ask()
    spent.set_user_attr(MINUTES_RUN, 2.0)  # a trial that ran 2 minutes, then was killed
    open_study(request)  # the next sitting marks it failed: 2 of the 1 minute spent
    with caplog.at_level(logging.WARNING, logger="training.workflows.tune"):
        summary = tune(ws, request, str(log_file))
    assert [t["state"] for t in summary["trials"]] == ["fail", "waiting"]  # nothing ran
    assert "has spent its 1.0-minute budget (2.0 minutes run)" in caplog.text
    assert "a larger --budget-minutes continues it" in caplog.text


def test_the_search_covers_the_chosen_towers_own_keys_and_leaves_the_set_ones() -> None:
    base = load_config([], ["model.tower=bsarec"])
    space = TuneRequest(base, Path("unused"), 1.0, 1).space()
    own = {key for key in space if key.startswith("model.tower.")}
    assert own == {f"model.tower.{k}" for k in ("num_layers", "num_heads", "alpha", "cutoff")}
    fixed = frozenset({"model.num_layers", "model.tower.alpha"})  # the former spelling too
    left = set(TuneRequest(base, Path("unused"), 1.0, 1, fixed=fixed).space())
    assert left == set(space) - {"model.tower.num_layers", "model.tower.alpha"}
    params = {"model.tower.alpha": 0.25, "model.tower.cutoff": 3, "model.dim": 64}
    cfg = trial_config(base, params, 2.0)
    assert (cfg.model.tower.alpha, cfg.model.tower.cutoff, cfg.model.dim) == (0.25, 3, 64)
    mean = TuneRequest(load_config([], ["model.tower=mean"]), Path("unused"), 1.0, 1).space()
    assert not [key for key in mean if key.startswith("model.tower.")]
