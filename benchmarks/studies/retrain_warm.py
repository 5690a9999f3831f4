"""Warm retrain against a full retrain on amazon-beauty, new-item initialisation against random.

Usage: python -m benchmarks.studies.retrain_warm [--out DIR] [--dataset CSV] [--work DIR]
    [--threads N] [--base-minutes M] [--precision P] [--only STEP ...]

Every user's history is split by position: the first 80% is the log a model is trained on and
published from (`base`); the remaining 20% arrives as new logs. On a copy of the base home
each variant runs `recsys retrain --logs new.csv` (its flags: `studies/retrain_variants.py`):
- `warm_context`: warm start, new items from their contexts' queries (the default);
- `warm_random`: warm start, new items' rows random;
- `sp_0.4_0.1`, `sp_0.8_0.05`: warm start with shrink and perturb (`retrain.shrink`,
  `retrain.perturb`: the served weights times lambda plus p times a fresh initialisation);
- `full`: `--full`, from scratch on the same events;
- `zero_context`, `zero_random`: the warm start itself (`--max-epochs 0`), each initialisation;
- `warm_cosine18`: 18 warm rounds with the lr decayed over them (cosine);
- `warm_mean3`, `full_mean3`: warm and full with today's defaults (early stopping on the mean
  of the last 3 rounds, precision auto); the base and the variants above ran before those,
  each round alone and in fp32, and pin that (`AS_BEFORE`);
- `warm_base_mean3`: today's defaults warm, from `base_mean3`, a base trained with them too
  (`BASES`): does a served model trained to today's stopping rule need fewer warm rounds?
- `warm_refit`, `full_refit`, `warm_refit_p1`: today's defaults with the retrain's refit (the
  kept round gated, then 8 epochs on the val events too), from `base_refit` (trained with the
  refit as well); the last stopped at the warm curve's first plateau (`retrain.patience=1`);
  `warm_refit_p1_sp` stops there too, with shrink and perturb (0.4 / 0.1), and
  `warm_refit_sp` is that shrink and perturb under the default patience; `warm_refit_p10`
  runs to a training's patience (10 rounds), and `full_refit_seed43` is the full retrain
  with another seed (how far the reference itself moves between seeds); `warm_refit_p1_e16`
  is the first-plateau stop with 16 refit epochs (the warm model's refit climbs slower),
  `full_refit_e16` the full retrain with them (the same fit, a longer refit).
  Every run before them pins no refit (`NO_REFIT`);
- `warm_refit_p1_e14`: the retrain defaults then (`retrain.patience` 1, `retrain.refit_epochs`
  14, chosen one event back by studies/retrain_refit_study.py); every variant above pins
  the retrain defaults it ran with (`BEFORE_E14`: patience 3, the training's refit epochs);
  `warm_refit_p1_e14_r8` (and `_seed43`) caps its fit at 8 rounds (`retrain.max_epochs`);
  `warm_refit_p1_r4_e20` and `warm_refit_p1_r2_e20` (each with `_seed43`) at 4 and 2, with
  20 refit epochs (the latter today's defaults).
Each variant's test metrics are also measured on the rows whose target is a new item (one the
base model never saw): `DIR/<variant>_new_items.json`.
Each step writes the record `DIR/<step>.json` (its flags; wall seconds, the retrain's JSON,
test metrics of the candidate) and is skipped when that file exists, so the sweep resumes. At
the end, `DIR/paired.json` holds the paired bootstrap of test NDCG@10 of each warm variant
against the full retrain (`harness/paired.py`, as studies/paired_ndcg.py), `DIR/paired_mean3.json`
the same under today's stopping rule; each is computed again when its variants change, from
each variant's per-user test NDCG@10, which `DIR/<variant>_test_ndcg.npz` keeps (written
while its home exists: a new machine needs no rerun for a new pair). `DIR/curves.json` keeps each
run's validation rounds (read from its home's `metrics.csv` while the home exists). Timings
are wall clock; each record holds the machine's load average before and after its step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP, LogToSplitOption, beauty_log
from benchmarks.studies.retrain_variants import BASE_OF, BASES, BY_HAND, PAIRS, VARIANTS

RECSYS = str(Path(sys.executable).parent / "recsys")


def split_by_position(csv: Path, out: Path, share: float = 0.8) -> tuple[Path, Path]:
    """`out/first.csv` (each user's first `share` of events) and `out/new.csv` (the rest)."""
    first, new = out / "first.csv", out / "new.csv"
    if not (first.exists() and new.exists()):
        events = pl.read_csv(csv).sort("user_id", "timestamp", maintain_order=True)
        ranked = events.with_columns(
            pos=pl.int_range(pl.len()).over("user_id"), n=pl.len().over("user_id")
        )
        cut = (pl.col("n") * share).floor()
        ranked.filter(pl.col("pos") < cut).drop("pos", "n").write_csv(first)
        ranked.filter(pl.col("pos") >= cut).drop("pos", "n").write_csv(new)
    return first, new


def _run(args: list[str], threads: int) -> tuple[dict[str, Any], float]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    done = subprocess.run(
        [RECSYS, *args, "--json"], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout), time.perf_counter() - start


def _step(path: Path, config: dict[str, Any], make: Callable[[], dict[str, Any]]) -> None:
    """Run a step and keep its record at `path` (its `config`, what `make` returns), once."""
    if not path.exists():
        started = records.start()
        records.save(path, config, make(), started)


def main(
    out: Annotated[Path, typer.Option(help="Result folder.")] = RESULTS / "retrain",
    dataset: LogToSplitOption = None,
    work: Annotated[Path, typer.Option(help="Scratch folder for the homes.")] = TEMP
    / "retrain-bench",
    threads: Annotated[int, typer.Option(help="Threads per run.")] = 2,
    base_minutes: Annotated[
        float, typer.Option(help="The bases' time cap (a base beside other runs is slower).")
    ] = 20,
    only: Annotated[
        list[str] | None,
        typer.Option(help="Run only these bases and variants (repeatable).", show_default="all"),
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option(help="train.precision for every run.", show_default="each run's own, auto"),
    ] = None,
) -> None:
    """Run the sweep (resumable); see the module docstring."""
    steps = set(only or [*BASES, *VARIANTS])
    if unknown := steps - {*BASES, *VARIANTS}:
        raise typer.BadParameter(f"--only: no such base or variant: {sorted(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    csv = dataset or beauty_log()
    first, new = split_by_position(csv, work)
    pinned = ["--set", f"train.threads={threads}"]
    pinned += ["--set", f"train.precision={precision}"] if precision else []
    sets = [*pinned, "--set", "train.max_minutes=20"]

    def base(name: str, flags: list[str]) -> dict[str, Any]:
        shutil.rmtree(work / name, ignore_errors=True)
        capped = [*pinned, "--set", f"train.max_minutes={base_minutes}"]
        args = ["train", "--home", str(work / name), "--dataset", str(first), *capped, *flags]
        res, secs = _run(args, threads)
        return {"step": name, "wall_seconds": secs, "train": res}

    for name, flags in BASES.items():
        if name in steps:
            config = {"flags": flags, "pinned": pinned, "base_minutes": base_minutes}
            _step(out / f"{name}.json", config, partial(base, name, flags))
    for name in [name for name in VARIANTS if name in steps]:  # in their order
        _variant_steps(out, work, name, new, sets, threads)
    for file, (reference, names) in PAIRS.items():
        if steps >= {reference, *names}:
            _paired(out, work, file, reference, names)
    homes = {name: name for name in steps}
    _curves(out, work, {**homes, **({} if only else BY_HAND)})


def _variant_steps(
    out: Path, work: Path, name: str, new: Path, sets: list[str], threads: int
) -> None:
    """A variant's retrain and its new-item rows (each kept once), and its per-user scores."""
    flags = VARIANTS[name]
    config = {"flags": flags, "sets": sets, "base": BASE_OF.get(name, "base")}
    _step(out / f"{name}.json", config, partial(_variant, work, name, flags, new, sets, threads))
    _step(out / f"{name}_new_items.json", config, partial(_new_item_rows, work, out, name))
    if (work / name).is_dir():  # while the home exists: its pairs need it no more
        _per_user(out, work, name)


def _curves(out: Path, work: Path, homes: dict[str, str]) -> None:
    """`DIR/curves.json`: each run's validation rounds (fit seconds, val NDCG@10), from its home.

    `homes`: result name -> its home's folder in `work`. A run whose home is gone keeps the
    curve recorded before (or has none).
    """
    path = out / "curves.json"
    started = records.start()
    curves = records.read(path)["metrics"] if path.exists() else {}
    for name, home in homes.items():
        step = out / f"{name}.json"
        if name in curves or not step.exists():
            continue
        record = _metrics(step)
        version = (record.get("retrain") or record.get("train") or {}).get("version")
        metrics = work / home / "runs" / str(version) / "metrics.csv"
        if version and metrics.exists():
            rounds = pl.read_csv(metrics).filter(pl.col("val/ndcg@10").is_not_null())
            curves[name] = [
                {"round": i + 1, "fit_seconds": round(t, 1), "val_ndcg@10": round(v, 5)}
                for i, (t, v) in enumerate(rounds.select("time/fit_seconds", "val/ndcg@10").rows())
            ]
    records.save(path, {"homes": homes}, curves, started)


def _metrics(path: Path) -> dict[str, Any]:
    """What a step's record at `path` measured."""
    return dict(records.read(path)["metrics"])


def _variant(
    work: Path, name: str, flags: list[str], new: Path, sets: list[str], threads: int
) -> dict[str, Any]:
    home = work / name
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(work / BASE_OF.get(name, "base"), home)
    res, secs = _run(["retrain", "--home", str(home), "--logs", str(new), *flags, *sets], threads)
    test, _ = _run(
        ["evaluate", "--home", str(home), "--model", res["version"], "--split", "test"], threads
    )
    return {"step": name, "wall_seconds": secs, "retrain": res, "test": test}


def _new_item_rows(work: Path, out: Path, name: str) -> dict[str, Any]:
    """Test metrics of the variant's candidate on the rows whose target is a new item."""
    from data.workspace import Workspace
    from model.bundle import ModelBundle, read_manifest
    from training.config import RecsysConfig
    from training.workflows.pipeline import load_splits
    from training.workflows.scoring import bundle_metrics

    base_name = BASE_OF.get(name, "base")
    base = _metrics(out / f"{base_name}.json")["train"]["version"]
    old_items = read_manifest(work / base_name / "models" / base).num_items
    version = _metrics(out / f"{name}.json")["retrain"]["version"]
    model = ModelBundle.load(work / name / "models" / version)
    splits = load_splits(
        Workspace(work / name), RecsysConfig.model_validate(model.manifest.run_config())
    )
    rows = splits.test.filter(pl.col("target") > old_items)
    metrics, examples = bundle_metrics(model, rows)
    return {"step": f"{name}_new_items", "examples": examples, "test_new_items": metrics}


def _per_user(out: Path, work: Path, name: str) -> tuple[dict[str, Any], Any]:
    """The variant's label and per-user test NDCG@10, kept in `DIR/<name>_test_ndcg.npz`."""
    from benchmarks.harness.paired import load_per_user, per_user_ndcg, save_per_user

    path = out / f"{name}_test_ndcg.npz"
    if not path.exists():
        save_per_user(path, *per_user_ndcg(_run_dir(out, work, name)))
    return load_per_user(path)


def _paired(out: Path, work: Path, file: str, reference_name: str, names: list[str]) -> None:
    """Paired intervals of the warm variants `names` against the full retrain `reference_name`."""
    from benchmarks.harness.paired import paired_report

    started = records.start()
    warm = [str(_run_dir(out, work, name)) for name in names]
    reference = str(_run_dir(out, work, reference_name))
    path = out / file
    if path.exists():
        done = _metrics(path)
        runs = {r["run"] for r in done["results"]}
        if done["reference"]["run"] == reference and runs == set(warm):
            return
    scored = [_per_user(out, work, name) for name in names]
    report = paired_report(_per_user(out, work, reference_name), scored)
    records.save(path, {"reference": reference_name, "runs": names}, report, started)


def _run_dir(out: Path, work: Path, name: str) -> Path:
    version = _metrics(out / f"{name}.json")["retrain"]["version"]
    return work / name / "runs" / version


if __name__ == "__main__":
    typer.run(main)
