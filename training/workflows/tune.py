"""`recsys tune`: a small hyper-parameter search on a home's validation split, within a budget.

Optuna's TPE sampler proposes each trial's settings from `SEARCH_SPACE`; a trial is one
`training.loop.trainer.fit` capped at its share of the budget, scored by the best val NDCG@10 of
the fit (the test split is never evaluated). A Lightning callback reports every validation
round to Optuna and stops a trial that the median pruner judges hopeless
(`training/workflows/tune_pruning.py`). The study lives in `OUT/study.db`, so the same command
resumes (`training/workflows/tune_study.py`: killed trials, the budget spent, a sitting with
other settings refused). Each trial's config and score go to `OUT/trials.json`; the best
trial's settings to `OUT/best.yaml`, for `recsys train --config`. A sampler built on the
model's starting temperature (its settings' `fixes_the_temperature`) leaves
`model.learn_temperature` out of the search; plain dot-product logits (`model.normalize=false`)
leave the temperature out: the towers learn their own scale.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml

from data.split import Splits
from data.store import atomic_write
from data.workspace import Workspace
from model.tower_settings import FORMER_MODEL_KEYS
from training import distributed
from training.config import RecsysConfig
from training.loop.divergence import TrainingDivergedError
from training.sampler_settings import validate_sampler
from training.workflows.tune_pruning import PruneOnValidation, TrialCallbacks
from training.workflows.tune_study import minutes_spent, record_minutes_run, trial_minutes
from training.workflows.tune_study import open_study as open_study_at

log = logging.getLogger(__name__)

# name -> how the trial proposes it. Every key is a `section.key` of the config; the query
# tower's own keys (`model.tower.<key>`) come from its settings' `search_space`.
SEARCH_SPACE: dict[str, Callable[[optuna.Trial, str], Any]] = {
    "model.dim": lambda t, k: t.suggest_categorical(k, [64, 128, 256]),
    "model.dropout": lambda t, k: t.suggest_float(k, 0.1, 0.6),
    "model.temperature": lambda t, k: t.suggest_float(k, 0.02, 0.2, log=True),
    "model.learn_temperature": lambda t, k: t.suggest_categorical(k, [False, True]),
    "model.max_len": lambda t, k: t.suggest_categorical(k, [20, 50, 100]),
    "train.lr": lambda t, k: t.suggest_float(k, 3e-4, 1e-2, log=True),
    "train.lr_schedule": lambda t, k: t.suggest_categorical(k, ["constant", "cosine", "wsd"]),
    "train.batch_size": lambda t, k: t.suggest_categorical(k, [64, 128, 256]),
}


@dataclass
class TuneRequest:
    """What to search: the base config, where to write, the budget and the number of trials."""

    base: RecsysConfig
    out: Path
    budget_minutes: float
    trials: int
    seed: int = 0
    fixed: frozenset[str] = frozenset()  # `section.key`s the user set: left out of the search

    def space(self) -> dict[str, Callable[[optuna.Trial, str], Any]]:
        """The search space less the fixed keys (and a learned temperature the sampler refuses)."""
        left_out = {_tower_key(key) for key in self.fixed}
        if self.base.sampler.fixes_the_temperature():
            left_out.add("model.learn_temperature")
        if not self.base.model.normalize:  # dot products learn their own scale
            left_out |= {"model.temperature", "model.learn_temperature"}
        tower = self.base.model.tower.search_space
        own = {f"model.tower.{key}": _suggestion(spec) for key, spec in tower.items()}
        return {key: how for key, how in {**SEARCH_SPACE, **own}.items() if key not in left_out}


def _tower_key(key: str) -> str:
    """`model.num_layers` (a tower key at its former place) as `model.tower.num_layers`."""
    section, _, name = key.partition(".")
    return f"model.tower.{name}" if section == "model" and name in FORMER_MODEL_KEYS else key


def _suggestion(spec: tuple[Any, ...]) -> Callable[[optuna.Trial, str], Any]:
    """How a trial proposes a tower key from its `search_space` entry."""
    kind, *args = spec
    if kind == "int":
        return lambda t, k: t.suggest_int(k, *args)
    if kind == "float":
        return lambda t, k: t.suggest_float(k, *args)
    return lambda t, k: t.suggest_categorical(k, args[0])


def trial_config(base: RecsysConfig, params: dict[str, Any], minutes: float) -> RecsysConfig:
    """`base` with the trial's `params` and its time cap (`train.max_minutes`)."""
    dump = base.model_dump()
    for key, value in {**params, "train.max_minutes": minutes}.items():
        *path, name = key.split(".")
        node = dump
        for part in path:
            node = node[part]
        node[name] = value
    return RecsysConfig.model_validate(dump)


def open_study(request: TuneRequest) -> optuna.Study:
    """The request's study, created or resumed (`training.workflows.tune_study.open_study`)."""
    return open_study_at(request.out, request.seed, search_settings(request))


def search_settings(request: TuneRequest) -> dict[str, Any]:
    """The fixed keys, and the base config (`section.key` -> value) less the searched keys.

    The `retrain` section is left out: it shapes no trial (a study is not refused when only
    a retrain default changed).
    """
    searched, dump = request.space(), request.base.model_dump(mode="json")
    dump.pop("retrain", None)
    flat = {f"{section}.{k}": v for section, values in dump.items() for k, v in values.items()}
    flat.update({f"model.tower.{k}": v for k, v in flat.pop("model.tower").items()})
    base = {key: value for key, value in flat.items() if key not in searched}
    return {"base": base, "fixed": sorted(request.fixed)}


def tune(ws: Workspace, request: TuneRequest, dataset: str | None = None) -> dict[str, Any]:
    """Run the search (module docstring) on `ws`'s validation split; the trials and the best.

    Raises:
        HomeBusyError: a training, retrain or tune holds the home.

    """
    from data.datasets import check_dataset, prepare_dataset
    from data.lock import training_lock
    from training.workflows.pipeline import load_splits

    base = request.base.train
    distributed.require_one_process(base.devices, base.num_nodes, "tune")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # `_progress` says what matters
    if not ws.root.exists():  # a refused run leaves no home behind (the lock would make it)
        check_dataset(ws, dataset)  # (in a home, a study of other settings is refused first)
    with training_lock(ws, "tune"):
        study = open_study(request)  # before the data: a study of other settings is refused
        prepare_dataset(ws, dataset)
        splits = load_splits(ws, request.base)
        left = request.trials - len(study.get_trials(deepcopy=False, states=_ENDED))
        minutes = request.budget_minutes - minutes_spent(study)
        if left > 0 and minutes > 0:
            log.info("tune: %d trials in %.1f minutes, %s", left, minutes, request.out)
            objective = _Objective(request, study, splits)
            study.optimize(objective, n_trials=left, timeout=60.0 * minutes, callbacks=[_progress])
        elif left > 0:  # the budget counts the whole study, every sitting
            log.warning(
                "tune: the study in %s has spent its %.1f-minute budget (%.1f minutes run): no "
                "trial runs; a larger --budget-minutes continues it",
                request.out, request.budget_minutes, minutes_spent(study),
            )  # fmt: skip
        return write_results(study, request)


_ENDED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


class _Objective:
    """One trial: propose, fit within its share of the budget, score the best val NDCG@10."""

    def __init__(self, request: TuneRequest, study: optuna.Study, splits: Splits) -> None:
        self.request, self.study, self.splits = request, study, splits

    def __call__(self, trial: optuna.Trial) -> float:
        from training.loop.trainer import fit
        from training.workflows.scoring import measure

        params = {key: suggest(trial, key) for key, suggest in self.request.space().items()}
        share = self.request.budget_minutes / self.request.trials
        left = self.request.budget_minutes - minutes_spent(self.study)
        cap = max(min(share, left), 0.05)
        trial.set_user_attr("max_minutes", cap)
        cfg = trial_config(self.request.base, params, cap)
        run_dir = self.request.out / "runs" / f"trial-{trial.number}"
        shutil.rmtree(run_dir, ignore_errors=True)  # a killed sitting's leftovers
        try:
            # a trial ships no refit: its cap reserves none (train would: `ReservingTimer`)
            fitted = fit(
                cfg,
                self.splits,
                run_dir,
                start=TrialCallbacks(PruneOnValidation(trial)),
                refit_epochs=0,
            )
            trial.set_user_attr("epochs", len(fitted.epoch_seconds))
            trained = fitted.module.cfg  # an `auto` sampler picked for the catalogue
            return measure(fitted.module, fitted.data, trained, "val")["ndcg@10"]
        except TrainingDivergedError as err:  # hopeless settings: pruned, the search goes on
            log.info("tune: trial %d pruned: %s", trial.number, err)
            raise optuna.TrialPruned(str(err)) from None
        except KeyboardInterrupt:  # Optuna marks it failed: its settings run first next sitting,
            self.study.enqueue_trial(trial.params)  # as a killed trial's do (`tune_study`)
            raise
        finally:
            record_minutes_run(trial)  # a trial that fails counts these (`trial_minutes`)
            shutil.rmtree(run_dir, ignore_errors=True)


def _progress(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    score = "-" if trial.value is None else f"{trial.value:.4f}"
    best = _best(study)
    log.info(
        "tune: trial %d %s, val ndcg@10 %s; best %s", trial.number, trial.state.name.lower(),
        score, "-" if best is None else f"{best.value:.4f} (trial {best.number})",
    )  # fmt: skip


def _best(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    return max(done, key=lambda t: float(t.value or 0.0), default=None)


def trial_record(trial: optuna.trial.FrozenTrial, base: RecsysConfig) -> dict[str, Any]:
    """What trials.json keeps of a trial: state, score, cost, settings and its whole config."""
    cap = trial.user_attrs.get("max_minutes")
    minutes = trial_minutes(trial)
    config = trial_config(base, trial.params, cap).model_dump() if cap and trial.params else None
    return {
        "number": trial.number, "state": trial.state.name.lower(), "val_ndcg@10": trial.value,
        "minutes": None if minutes is None else round(minutes, 2), "max_minutes": cap,
        "epochs": trial.user_attrs.get("epochs"), "params": trial.params, "config": config,
    }  # fmt: skip


def best_settings(best: optuna.trial.FrozenTrial, base: RecsysConfig) -> dict[str, Any]:
    """The best trial's config where it differs from the defaults, without the trial's cap.

    The sampler's settings are compared with its own class's defaults, its name with the
    default sampler's.
    """
    chosen = trial_config(base, best.params, 1.0).model_dump(mode="json")
    defaults = RecsysConfig().model_dump(mode="json")
    own = validate_sampler({"name": base.sampler.name}).model_dump(mode="json")  # its defaults
    defaults["sampler"] = {**own, "name": defaults["sampler"]["name"]}
    diff: dict[str, Any] = {}
    for section, values in chosen.items():
        changed = {k: v for k, v in values.items() if v != defaults[section][k]}
        if section == "train":
            changed.pop("max_minutes", None)  # the trial's cap, not a setting to keep
        if changed:
            diff[section] = changed
    if base.train.max_minutes is not None:
        diff.setdefault("train", {})["max_minutes"] = base.train.max_minutes
    return diff


def write_results(study: optuna.Study, request: TuneRequest) -> dict[str, Any]:
    """`trials.json` and `best.yaml` (when a trial completed); returns the summary."""
    trials = [trial_record(t, request.base) for t in study.get_trials(deepcopy=False)]
    best = _best(study)
    summary = {
        "out": str(request.out), "budget_minutes": request.budget_minutes,
        "minutes_spent": round(minutes_spent(study), 2), "trials": trials,
        "best": None if best is None else {"number": best.number, "val_ndcg@10": best.value},
        "best_config": None,
    }  # fmt: skip
    if best is not None:
        path = request.out / "best.yaml"
        head = f"# recsys tune: trial {best.number}, val ndcg@10 {best.value:.4f}\n"
        text = head + yaml.safe_dump(best_settings(best, request.base), sort_keys=False)
        atomic_write(path, lambda tmp: tmp.write_text(text))
        summary["best_config"] = str(path)
    body = json.dumps(summary, indent=1) + "\n"
    atomic_write(request.out / "trials.json", lambda tmp: tmp.write_text(body))
    return summary
