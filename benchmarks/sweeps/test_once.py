"""`bench quality-test`: rank the test split of a validation-only study, once, for chosen runs.

A study decided on validation (`--grid towers`, `--grid recipe`) never ranks the test split
while it trains. When its rule has chosen, this command ranks test for the chosen run and its
control from the model each run ships (its best epoch on validation, `best.ckpt`, or, for a run
that refitted, the refit model; in the run's scratch home), and writes one record per run,
`RESULTS/<study>_test/<dataset>/<run>.json`: test NDCG@10 and Recall@10 with a 95% bootstrap
interval over test users, the run's val NDCG@10, and `test_rankings`, how many times test has
been ranked for that run. A second ranking is refused unless asked for (`--again`), and then
counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from benchmarks import records
from benchmarks.harness.paired import mean_interval, per_user_ndcg
from benchmarks.sweeps.grids import RESULT_DIRS, VALIDATION_ONLY
from benchmarks.sweeps.run_records import row as record_row
from data.errors import RecsysInputError

RESAMPLES = 2000


def test_dir(grid: str) -> Path:
    """Where a validation-only grid's test records go: beside its study, `<study>_test`."""
    home = RESULT_DIRS[grid]
    return home.parent / f"{home.name}_test"


def _study_run(grid: str, name: str) -> dict[str, Any]:
    """The study's row of `dataset/run` (RecsysInputError if it has none or lost its model)."""
    dataset, _, run = name.partition("/")
    path = RESULT_DIRS[grid] / dataset / f"{run}.json"
    if not run or not path.is_file():
        raise RecsysInputError(f"{name}: no record {path} (name a run as DATASET/RUN)")
    record = records.read(path)
    row = {**record_row(record), "commit": record["commit"]}
    if not (Path(row["run_dir"]) / "checkpoints" / "best.ckpt").is_file():
        raise RecsysInputError(
            f"{name}: its model is gone ({row['run_dir']}); train it again with "
            f"`bench quality --grid {grid}` (delete {path} first)"
        )
    return row


def _rankings_so_far(path: Path, again: bool) -> int:
    """How many times test was ranked for the run; refused when it was and `again` is off."""
    if not path.is_file():
        return 0
    done = int(records.read(path)["metrics"]["test_rankings"])
    if not again:
        raise RecsysInputError(
            f"test was ranked {done} time(s) for this run already ({path}); --again ranks it "
            "once more and counts it"
        )
    return done


def shipped(row: dict[str, Any]) -> tuple[Path | None, str]:
    """The checkpoint of the model the run ships (None: its final one) and how to name it."""
    if row.get("refit_epochs"):
        return None, "the refit model (what the run ships)"
    best = Path(row["run_dir"]) / "checkpoints" / "best.ckpt"
    return best, "best.ckpt (best epoch on validation)"


def _measure(row: dict[str, Any], checkpoint: Path | None) -> dict[str, Any]:
    """Test NDCG@10 and Recall@10 (one target a user: a hit iff NDCG@10 > 0), with intervals."""
    _, ndcg = per_user_ndcg(Path(row["run_dir"]), checkpoint=checkpoint, split="test")
    out: dict[str, Any] = {"users": len(ndcg)}
    for key, values in (("ndcg@10", ndcg), ("recall@10", (ndcg > 0).astype(np.float64))):
        mean, low, high = mean_interval(values, RESAMPLES, seed=0)
        out[key] = {"mean": round(mean, 5), "low": round(low, 5), "high": round(high, 5)}
    return out


def _checked(grid: str, name: str, again: bool) -> tuple[dict[str, Any], Path, int]:
    """The run's row, its test record's path and its rankings so far; refused as said."""
    row = _study_run(grid, name)
    path = test_dir(grid) / row["dataset"] / f"{row['name']}.json"
    return row, path, _rankings_so_far(path, again)


def rank_test(grid: str, name: str, again: bool = False) -> dict[str, Any]:
    """Rank test for the study run `name` (`dataset/run`) and write its record; the record."""
    return _rank(grid, *_checked(grid, name, again))


def _rank(grid: str, row: dict[str, Any], path: Path, done: int) -> dict[str, Any]:
    """Rank test for the run of `row`, ranked `done` times before; its record at `path`."""
    started = records.start()
    checkpoint, named = shipped(row)
    metrics = {
        "name": row["name"], "dataset": row["dataset"], "study_commit": row.get("commit"),
        "val_ndcg@10": row["val"]["ndcg@10"], "test": _measure(row, checkpoint),
        "test_rankings": done + 1, "checkpoint": named, "resamples": RESAMPLES,
    }  # fmt: skip
    return records.save(path, row["config"], metrics, started, root=test_dir(grid))


def quality_test(
    runs: Annotated[list[str], typer.Argument(help="Runs to rank, as DATASET/RUN.")],
    grid: Annotated[str, typer.Option(help="The validation-only study.")] = "towers",
    again: Annotated[
        bool, typer.Option(help="Rank a run whose test was ranked before (counted).")
    ] = False,
) -> None:
    """Rank the test split once for chosen runs of a study decided on validation."""
    if grid not in VALIDATION_ONLY:
        raise RecsysInputError(
            f"--grid {grid}: its runs rank test as they train; one of "
            f"{', '.join(sorted(VALIDATION_ONLY))}"
        )
    checked = [_checked(grid, name, again) for name in runs]  # all refusals before any ranks
    for name, (row, path, done) in zip(runs, checked, strict=True):
        record = _rank(grid, row, path, done)
        test = record["metrics"]["test"]
        typer.echo(
            f"{name}: test NDCG@10 {test['ndcg@10']['mean']:.4f}, Recall@10 "
            f"{test['recall@10']['mean']:.4f} (val NDCG@10 {row['val']['ndcg@10']:.4f}); "
            f"test ranked {record['metrics']['test_rankings']} time(s) for it"
        )
