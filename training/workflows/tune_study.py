"""The Optuna study of `recsys tune` on disk: opened or resumed, guarded, and its time spent.

The study lives in `OUT/study.db` (SQLite). A sitting resumes it: a trial still marked running
was cut short by a kill, so it is marked failed and its settings are queued to run first; the
sampler goes on from the draws of the trials before (`caught_up_sampler`), so a search cut into
sittings proposes what one sitting would have; the budget counts the minutes each trial ran (a
killed one's until its last record, at each validation round and epoch end). The study keeps
the settings it searches from (the base config less the searched keys, and the fixed keys): a
sitting with others is refused, so two searches are never mixed in one study.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna

from data.errors import RecsysInputError

log = logging.getLogger(__name__)

STUDY = "recsys-tune"
MINUTES_RUN = "minutes_run"  # trial attribute: minutes from its start to its last record
SEARCH = "search"  # study attribute: the settings every sitting shares (`check_same_search`)


def open_study(out: Path, seed: int, settings: dict[str, Any]) -> optuna.Study:
    """The study in `out/study.db`, created or resumed, searching from `settings`.

    The caller holds the home's training lock, so a trial still marked running was cut short
    by a kill: it is marked failed and its settings are queued to run first.

    Raises:
        RecsysInputError: the study has trials of other settings.

    """
    out.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        storage=f"sqlite:///{out / 'study.db'}", study_name=STUDY, direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed), load_if_exists=True,
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2),
    )  # fmt: skip
    check_same_search(study, settings, out)
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(trial.params)
        log.info("tune: trial %d was cut short; its settings run again", trial.number)
    study.sampler = caught_up_sampler(study, seed)
    return study


def caught_up_sampler(study: optuna.Study, seed: int) -> optuna.samplers.TPESampler:
    """A sampler seeded with `seed` whose draws go on where the study's trials left them.

    A new sampler would propose the first sitting's settings again; this one replays every
    earlier trial's draws (in an in-memory copy of the study), so the next sitting proposes
    what one uninterrupted sitting would have. A queued trial drew nothing (its settings were
    given); one still waiting has not run.
    """
    sampler = optuna.samplers.TPESampler(seed=seed)
    copy = optuna.create_study(direction="maximize", sampler=sampler)
    for past in study.get_trials(deepcopy=False):
        if past.state == optuna.trial.TrialState.WAITING:
            continue
        if "fixed_params" in past.system_attrs:  # what it was given; it drew the rest
            copy.enqueue_trial(past.system_attrs["fixed_params"])
        replayed = copy.ask(past.distributions)
        if past.state == optuna.trial.TrialState.COMPLETE:
            copy.tell(replayed, past.value)
        else:
            copy.tell(replayed, state=_ENDED_AS.get(past.state, optuna.trial.TrialState.FAIL))
    # the sampler's search-space cache is bound to the copy: a new one binds to `study`
    # (Optuna's private attribute; tests/app/test_tune_cli.py's sittings test guards it)
    sampler._search_space = optuna.search_space.IntersectionSearchSpace(include_pruned=True)
    return sampler


_ENDED_AS = {optuna.trial.TrialState.PRUNED: optuna.trial.TrialState.PRUNED}


def check_same_search(study: optuna.Study, settings: dict[str, Any], out: Path) -> None:
    """Keep `settings` on a study without trials; refuse a study whose trials had others.

    `settings`: `{"base": {section.key: value}, "fixed": [section.key, ...]}`, resolved. A key
    the study's record lacks was added since its trials ran, whose value then is unknown: it
    counts as a difference. A key only the record has (removed since) is none.
    """
    stored = study.user_attrs.get(SEARCH)
    if stored is None or not study.get_trials(deepcopy=False):
        study.set_user_attr(SEARCH, settings)
        return
    old, new = stored["base"], settings["base"]
    changed = [
        f"{key}: {old[key]!r} in the study, {new[key]!r} now"
        if key in old else f"{key}: not in the study (older than the key), {new[key]!r} now"
        for key in sorted(new) if key not in old or old[key] != new[key]
    ]  # fmt: skip
    if stored["fixed"] != settings["fixed"]:
        changed.insert(0, f"--set keys {stored['fixed']} in the study, {settings['fixed']} now")
    if changed:
        raise RecsysInputError(
            f"{out / 'study.db'} is a study of other settings ({'; '.join(changed)}): resume "
            f"with the same --config, --set and --sampler, or start fresh with another --out "
            f"(or remove {out})"
        )


def record_minutes_run(trial: optuna.Trial) -> None:
    """Keep on `trial` the minutes it has run so far: what counts of it if a kill ends it."""
    if trial.datetime_start is not None:
        minutes = (datetime.now() - trial.datetime_start).total_seconds() / 60.0
        trial.set_user_attr(MINUTES_RUN, minutes)


def trial_minutes(trial: optuna.trial.FrozenTrial) -> float | None:
    """Wall minutes a trial ran; None while it runs.

    A failed trial counts the minutes it kept (`MINUTES_RUN`): one cut short by a kill is
    stamped failed only when a later sitting reopens the study, so its end says nothing.
    """
    if trial.datetime_start is None or trial.datetime_complete is None:
        return None
    if trial.state == optuna.trial.TrialState.FAIL:
        return float(trial.user_attrs.get(MINUTES_RUN, 0.0))
    return (trial.datetime_complete - trial.datetime_start).total_seconds() / 60.0


def minutes_spent(study: optuna.Study) -> float:
    """Wall minutes of the trials that have ended, in earlier sittings or this one."""
    return sum(trial_minutes(t) or 0.0 for t in study.get_trials(deepcopy=False))
