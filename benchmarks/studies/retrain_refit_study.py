"""Where a warm retrain should stop and how many refit epochs it needs, on validation only.

Usage: python -m benchmarks.studies.retrain_refit_study [--out DIR] [--dataset CSV] [--work DIR]
    [--epochs K] [--threads N] [--base-threads N] [--precision P] [--arms ARM ...]

The retrain benchmark (`studies/retrain_warm.py`) one event back: every user's last event
(the test target) is dropped first, so the study's test target is the real validation event
and the real test split is never read. On what is left, the benchmark's split: a base
trained and published on each user's first 80% of events with the defaults (`base_refit`
there), the rest ingested as new logs. Each arm then fits as `recsys retrain` would (early
stopping on its validation rows, which the base never trained on: they are in the new logs
or the base's own test events), and from the fit's kept round trains K epochs on the
training sequences plus the validation events (the refit), ranking the test rows (the real
validation events) after each epoch:
- `warm_p1`, `warm_p3`: warm-started from the served base as the retrain's warm start is,
  early stopping with `retrain.patience` 1 and 3;
- `warm_p1_r2` ... `warm_p1_r10`: `warm_p1` with its fit capped at 2 ... 10 rounds
  (`retrain.max_epochs`), the kept round the best of those;
- `full`: from scratch with `train.patience` (the `--full` retrain).
Each arm writes the record `DIR/<arm>.json` (the fit's rounds and seconds, the kept round's
val and test NDCG@10, the refit curve) and is skipped when it exists; the base home is trained
once (`DIR/base.json`); `DIR/refit_curves.png` plots the finished arms' curves. Threads:
`--threads` per arm, `--base-threads` for the base (default: `--threads`); the records hold
the load averages. `--precision` pins `train.precision` for the base and every arm (default:
auto, which is bf16 on a machine that multiplies bf16 natively and fp32 elsewhere).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP, LogToSplitOption, beauty_log
from benchmarks.studies.refit_study import continue_from_best
from benchmarks.studies.retrain_warm import split_by_position
from data.datasets import dataset_files, ingest_once
from data.workspace import Workspace
from model import bundle
from training.config_loading import load_config
from training.loop.trainer import fit
from training.workflows.pipeline import load_splits
from training.workflows.refit import with_validation_events
from training.workflows.retrain import served_config, served_warm_start
from training.workflows.scoring import measure

RECSYS = str(Path(sys.executable).parent / "recsys")
# arm -> (patience, round cap); patience None: from scratch, with `train.patience`
ARMS: dict[str, tuple[int | None, int | None]] = {
    "warm_p1": (1, None),
    "warm_p3": (3, None),
    "full": (None, None),
    **{f"warm_p1_r{cap}": (1, cap) for cap in (2, 4, 6, 8, 10)},
}


def one_event_back(csv: Path, work: Path) -> Path:
    """`work/one_back.csv`: `csv` without each user's last event (by time, then file order)."""
    path = work / "one_back.csv"
    if not path.exists():
        events = pl.read_csv(csv).sort("user_id", "timestamp", maintain_order=True)
        kept = events.filter(pl.int_range(pl.len()).over("user_id") < pl.len().over("user_id") - 1)
        kept.write_csv(path)
    return path


def train_base(work: Path, first: Path, threads: int, precision: str) -> dict[str, Any]:
    """The served base: `recsys train` on the first 80%, the defaults (as `base_refit`).

    Capped at 40 minutes (the bf16 bases took under 20; one thread in fp32 takes longer).
    """
    home = work / "base"
    shutil.rmtree(home, ignore_errors=True)
    sets = ["--set", f"train.threads={threads}", "--set", "train.max_minutes=40"]
    sets += ["--set", f"train.precision={precision}"]
    args = [RECSYS, "train", "--home", str(home), "--dataset", str(first), *sets, "--json"]
    done = subprocess.run(args, check=True, capture_output=True, text=True)
    return {"step": "base", "train": json.loads(done.stdout)}


def run_arm(
    name: str, work: Path, new: Path, epochs: int, threads: int, precision: str
) -> dict[str, Any]:
    """One arm on a copy of the base home with the new logs ingested (module docstring)."""
    home = work / name
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(work / "base", home)
    ws = Workspace(home)
    ingest_once(ws, dataset_files(new))
    sets = [f"train.threads={threads}", "train.refit_epochs=0", "train.max_minutes=90"]
    sets += [f"train.precision={precision}"]
    cfg = load_config(overrides=sets, base=served_config(ws.models_dir))
    splits = load_splits(ws, cfg)
    patience, cap = ARMS[name]
    warm = patience is not None
    served = bundle.ModelBundle.load(ws.models_dir / str(bundle.current_version(ws.models_dir)))
    start = served_warm_start(ws, cfg, splits, served) if warm else None
    run = home / "runs" / "fit"
    capped: dict[str, Any] = {"max_epochs": cap} if cap is not None else {}
    fitted = fit(cfg, splits, run, start=start, patience=patience, **capped)
    kept = {s: measure(fitted.module, fitted.data, cfg, s)["ndcg@10"] for s in ("val", "test")}
    curve = continue_from_best(cfg, with_validation_events(splits), fitted, run, epochs, "refit")
    return {
        "arm": name, "warm": warm, "patience": patience or cfg.train.patience, "round_cap": cap,
        "rounds": len(fitted.epoch_seconds), "fit_seconds": fitted.seconds,
        "kept_val_ndcg@10": kept["val"], "kept_test_ndcg@10": kept["test"],
        "refit_test": curve, "threads": threads, "precision": precision,
    }  # fmt: skip


def _step(path: Path, config: dict[str, Any], make: Callable[[], dict[str, Any]]) -> None:
    """Run a step and keep its record at `path` (its `config`, what `make` returns), once."""
    if not path.exists():
        started = records.start()
        records.save(path, config, make(), started)


def plot(out: Path) -> None:
    """`DIR/refit_curves.png`: the finished arms' test NDCG@10 (real val rows) by refit epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in ARMS:
        if (path := out / f"{name}.json").exists():
            record = records.read(path)["metrics"]
            curve = [row["ndcg@10"] for row in record["refit_test"]]
            label = f"{name}: {record['rounds']} rounds, {record['fit_seconds']:.0f} s fit"
            ax.plot(range(1, len(curve) + 1), curve, marker=".", label=label)
    ax.set(xlabel="refit epochs", ylabel="NDCG@10 on the real validation rows")
    ax.set_title(f"{out.name}: the retrain one event back, refit after the kept round")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "refit_curves.png", dpi=110)
    plt.close(fig)


def main(
    out: Annotated[Path, typer.Option(help="Result folder.")] = RESULTS
    / "retrain_refit_study/amazon-beauty",
    dataset: LogToSplitOption = None,
    work: Annotated[Path, typer.Option(help="Scratch folder for the homes.")] = TEMP
    / "retrain-refit-study"
    / "amazon-beauty",
    epochs: Annotated[int, typer.Option(help="Refit epochs ranked.")] = 24,
    threads: Annotated[int, typer.Option(help="Threads per run.")] = 1,
    base_threads: Annotated[
        int | None, typer.Option(help="Threads for the base.", show_default="--threads")
    ] = None,
    precision: Annotated[str, typer.Option(help="train.precision of every run.")] = "auto",
    arms: Annotated[
        list[str] | None, typer.Option(help="Arms to run (repeatable).", show_default="all")
    ] = None,
) -> None:
    """Train the base if needed, then each arm without a result file."""
    if unknown := set(arms or []) - set(ARMS):
        raise typer.BadParameter(f"--arms: no such arm: {sorted(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    csv = dataset or beauty_log()
    first, new = split_by_position(one_event_back(csv, work), work)
    if bundle.current_version(Workspace(work / "base").models_dir) is None:  # a new machine
        (out / "base.json").unlink(missing_ok=True)  # trained again (deterministic: the same)
    common, base_threads = {"dataset": str(csv), "precision": precision}, base_threads or threads
    base = partial(train_base, work, first, base_threads, precision)
    _step(out / "base.json", {**common, "threads": base_threads}, base)
    for name in arms or ARMS:
        patience, cap = ARMS[name]
        setting = {**common, "patience": patience, "round_cap": cap, "epochs": epochs}
        arm = partial(run_arm, name, work, new, epochs, threads, precision)
        _step(out / f"{name}.json", {**setting, "threads": threads}, arm)
    plot(out)


if __name__ == "__main__":
    typer.run(main)
