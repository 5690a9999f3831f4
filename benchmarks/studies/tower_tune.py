"""The query-tower study's search over the chosen tower's own keys, with `recsys tune`.

Usage: python -m benchmarks.studies.tower_tune DATASET [--trials N] [--seed S]
    [--run sasrec-ours] [--minutes 30] [--data-root DIR] [--scratch DIR]

The study's run `--run` (`bench quality --grid towers`) fixes everything but its tower's own
keys: its resolved config is the search's base, and every key of `recsys tune`'s shared search
space (`training.workflows.tune.SEARCH_SPACE`) is held at the run's value, so the trials differ
from the run only in what the tower's `search_space` names (sasrec: blocks and heads; bsarec:
those, alpha and the cut-off). Each trial trains as the study's runs do (the full softmax,
validation only, no refit, one thread) for `--minutes`, so its val NDCG@10 compares with the
run's own.

The study is `recsys tune`'s, in `SCRATCH/<run>/<dataset>-study` (resumable; the home in
`SCRATCH/<dataset>`). It runs one trial per sitting (a sitting's draws go on from the last
one's, so the trials are those one uninterrupted `recsys tune --seed S` would propose), so each
trial's record (`results/tower_tune/<run>/<dataset>/trial-<n>.json`: its settings, val
NDCG@10, epochs, minutes, the machine's load around it) is written as it ends. The same
command resumes where the records stop. The run's config is rebuilt as the grid builds it
(`run_config`), which the study's own records are checked against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP, datasets_root
from benchmarks.sweeps.sweep import Sweep, run_config
from benchmarks.sweeps.tower_grid import towers

OUT = RESULTS / "tower_tune"
SCRATCH = TEMP / "tower-tune"


@dataclass
class Search:
    """What the search reads and writes, the study run it starts from, and each trial's cap."""

    run: str = "sasrec-ours"
    minutes: float = 30.0
    seed: int = 1
    data_root: Path = field(default_factory=datasets_root)
    scratch: Path = SCRATCH
    out: Path = OUT
    sets: list[str] = field(default_factory=list)  # the sweep's --set (tests: a tiny model)

    def record_path(self, dataset: str, number: int) -> Path:
        """`OUT/<run>/<dataset>/trial-<number>.json`."""
        return self.out / self.run / dataset / f"trial-{number}.json"


def base_config(dataset: str, search: Search) -> Any:
    """The study run's config, as the study built it, with the trials' cap: the search's base."""
    specs = {(s.dataset, s.name): s for s in towers(search.out)[0]}
    if (dataset, search.run) not in specs:
        raise typer.BadParameter(f"the tower study plans no run {dataset}/{search.run}")
    cfg = run_config(specs[dataset, search.run], Sweep(sets=search.sets))
    train = cfg.train.model_copy(update={"max_minutes": search.minutes, "refit_epochs": 0})
    return cfg.model_copy(update={"train": train})


def sitting_budget(minutes: float, trial_count: int, spent: float) -> float:
    """The study budget under which trial `trial_count` (1-based) gets exactly `minutes`.

    `recsys tune` caps a trial at min(budget / trials, budget - spent): a budget of
    max(minutes * trials, spent + minutes) makes both at least `minutes`, and one of them equal.
    """
    return max(minutes * trial_count, spent + minutes)


def run_trial(dataset: str, number: int, search: Search) -> dict[str, Any]:
    """One sitting of the study: its `number`-th ended trial (0-based), and its record."""
    from data.workspace import Workspace
    from training.workflows.tune import SEARCH_SPACE, TuneRequest, tune

    folder = search.scratch / search.run / f"{dataset}-study"
    request = TuneRequest(
        base_config(dataset, search), folder, search.minutes, number + 1, search.seed,
        frozenset(SEARCH_SPACE),
    )  # fmt: skip
    request.budget_minutes = sitting_budget(search.minutes, number + 1, spent_minutes(folder))
    started = records.start()
    source = str(search.data_root / dataset)
    summary = tune(Workspace(search.scratch / dataset), request, source)
    trial = [t for t in summary["trials"] if t["state"] in ("complete", "pruned")][number]
    metrics = {
        "dataset": dataset, "run": search.run, "trial": number, "state": trial["state"],
        "params": trial["params"], "val_ndcg@10": trial["val_ndcg@10"],
        "epochs": trial["epochs"], "minutes": trial["minutes"],
        "max_minutes": trial["max_minutes"], "seed": search.seed,
    }  # fmt: skip
    path = search.record_path(dataset, number)
    path.parent.mkdir(parents=True, exist_ok=True)
    return records.save(path, trial["config"], metrics, started, root=search.out, threads=1)


def spent_minutes(folder: Path) -> float:
    """The study's minutes so far, read without resuming it (`tune` resumes it, under its lock).

    A trial still marked running was killed: `tune` will count the minutes it kept, so they
    count here too.
    """
    import optuna

    from training.workflows.tune_study import MINUTES_RUN, STUDY, minutes_spent

    if not (folder / "study.db").is_file():
        return 0.0
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{folder / 'study.db'}")
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    return minutes_spent(study) + sum(t.user_attrs.get(MINUTES_RUN, 0.0) for t in running)


def run_study(dataset: str, trials: int, search: Search) -> list[dict[str, Any]]:
    """The trials that have no record yet, one per sitting; the records written."""
    done = []
    for number in range(trials):
        if not search.record_path(dataset, number).is_file():
            done.append(run_trial(dataset, number, search))
    return done


def main(
    dataset: Annotated[str, typer.Argument(help="amazon-beauty or amazon-toys.")],
    trials: Annotated[int, typer.Option(min=1, help="Trials in all.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the search's sampler.")] = 1,
    run: Annotated[str, typer.Option(help="The study run whose tower is searched.")] = (
        "sasrec-ours"
    ),
    minutes: Annotated[float, typer.Option(min=0.1, help="Each trial's cap.")] = 30.0,
    data_root: Annotated[Path | None, typer.Option(help="Folder of the datasets.")] = None,
    scratch: Annotated[Path, typer.Option(help="The study's home (kept).")] = SCRATCH,
) -> None:
    """Run the trials that have no record yet, each recorded as it ends."""
    search = Search(run, minutes, seed, data_root or datasets_root(), scratch)
    for record in run_study(dataset, trials, search):
        got = record["metrics"]
        typer.echo(f"{dataset} trial {got['trial']} {got['params']}: {got['val_ndcg@10']}")


if __name__ == "__main__":
    typer.run(main)
