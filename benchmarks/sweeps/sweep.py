"""`bench quality --grid NAME`: the sampler sweep, one result record per run, resumable.

Each run of the grid (`sweeps/sweep_grid.py`) trains in its own home,
`SCRATCH/<dataset>/<run>/` (kept: its checkpoints serve `studies/paired_ndcg.py`), and
writes the record `OUT/<dataset>/<run>.json` (config; test and val metrics, seconds per epoch,
sampling ms per step, proposal KL, validation curve; machine load) and `<run>.ndcg.npz`
(per-user test NDCG@10, for the paired bootstrap of the report). A run whose record holds the
same settings (config and dataset contents) is skipped; one whose settings changed is trained
again, unless only its early stopping did and it provably trained as today's would
(`sweeps/reuse.py`). Several processes may run the same command: a run's home lock
(`data/lock.py`) is its claim.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP, datasets_root
from benchmarks.sweeps.reuse import stands_for, training_settings
from benchmarks.sweeps.sweep_grid import PROTOCOL, Planner, RunSpec
from data.errors import RecsysInputError
from data.workspace import Workspace
from training.config_loading import build_run_config

log = logging.getLogger(__name__)

SWEEP_DIR = RESULTS / "sampler_sweep"
SCRATCH = TEMP / "sampler-sweep"


@dataclass
class Sweep:
    """Where a sweep reads data and writes results, and the `--set` overrides of every run."""

    out: Path = SWEEP_DIR
    data_root: Path = field(default_factory=datasets_root)
    scratch: Path = SCRATCH
    sets: list[str] = field(default_factory=list)
    trainer_overrides: dict[str, Any] = field(default_factory=dict)
    test: bool = True  # False: runs never evaluate the test split (a study on validation)
    _prints: dict[str, str] = field(default_factory=dict)

    def source(self, dataset: str) -> str:
        """What `prepare_dataset` reads: `synthetic`, or the dataset's folder under data_root."""
        return dataset if dataset == "synthetic" else str(self.data_root / dataset)

    def fingerprint(self, dataset: str) -> str:
        """sha256 of the dataset's log files (cached): part of a run's settings."""
        if dataset not in self._prints:
            from data.datasets import dataset_files, fingerprint

            source = self.source(dataset)
            files = [] if source == "synthetic" else dataset_files(Path(source))
            self._prints[dataset] = ",".join(fingerprint(f) for f in files) or source
        return self._prints[dataset]

    def result_path(self, spec: RunSpec) -> Path:
        """`OUT/<dataset>/<run>.json`."""
        return self.out / spec.dataset / f"{spec.name}.json"


class SamplerClock:
    """A `training.loop.trainer.fit` start hook that times every `sampler.sample` call of a run."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def apply(self, module: Any) -> list[Any]:
        """Wrap the module's sampler's `sample` (nothing to time for the full softmax)."""
        sampler = module.sampler
        if sampler is not None:
            draw = sampler.sample

            def timed(*args: Any, **kwargs: Any) -> Any:
                began = time.perf_counter()
                try:
                    return draw(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - began
                    self.calls += 1

            sampler.sample = timed
        return []

    def ms_per_step(self) -> float | None:
        """Mean milliseconds of one draw (one per training step); None without a sampler."""
        return round(1000.0 * self.seconds / self.calls, 3) if self.calls else None


def run_config(spec: RunSpec, sweep: Sweep) -> Any:
    """The run's config: its sampler's preset, m, the protocol, its own and the sweep's sets."""
    sets = [*PROTOCOL, *spec.overrides(), *sweep.sets]
    return build_run_config(overrides=sets, sampler=spec.sampler, num_negatives=spec.m)


def is_done(spec: RunSpec, sweep: Sweep) -> bool:
    """The run has a record with the same settings and dataset contents."""
    path = sweep.result_path(spec)
    if not path.is_file():
        return False
    record = records.read(path)
    current = training_settings(run_config(spec, sweep))
    if record["metrics"].get("data_sha256") != sweep.fingerprint(spec.dataset):
        return False
    return stands_for(record, current)


def require_valid_grid(specs: list[RunSpec], sweep: Sweep) -> None:
    """Refuse a sweep that could not run whole, before anything trains (RecsysInputError).

    A dataset missing under `--data-root`, or a run whose settings (with the sweep's `--set`s)
    are invalid, clash, or ask for several processes (a run trains in this one).
    """
    from training import distributed
    from training.combinations import refuse_clashes

    missing = sorted(
        {s.dataset for s in specs if not Path(sweep.source(s.dataset)).exists()} - {"synthetic"}
    )
    if missing:
        raise RecsysInputError(f"--data-root {sweep.data_root}: no {', '.join(missing)} in it")
    for spec in specs:
        try:
            cfg = run_config(spec, sweep)
            refuse_clashes(cfg)
            distributed.require_one_process(cfg.train.devices, cfg.train.num_nodes, "bench quality")
        except RecsysInputError as err:
            raise RecsysInputError(f"run {spec.dataset}/{spec.name}: {err}") from None


class SweepRunsFailedError(RuntimeError):
    """Some runs of a sweep failed (logged); the others were trained."""


def run_sweep(planner: Planner, sweep: Sweep) -> list[str]:
    """Train pending runs, planning again after each, until none is left to take; their names.

    Each plan is checked whole before any of its runs trains (`require_valid_grid`). A run
    another process holds is passed over; a run that fails is logged and not retried by this
    process, and the others go on.

    Raises:
        RecsysInputError: a dataset of the grid is missing, or a run's settings are bad.
        SweepRunsFailedError: at the end, when a run failed (its traceback is in the log).

    """
    trained: list[str] = []
    failed: set[str] = set()
    while True:
        specs, _ = planner(sweep.out)
        require_valid_grid(specs, sweep)  # again after each run: a plan may add runs
        for spec in specs:
            key = f"{spec.dataset}/{spec.name}"
            if key in failed or is_done(spec, sweep):
                continue
            try:
                if train_run(spec, sweep) is not None:
                    trained.append(key)
                    break
            except Exception:
                log.exception("bench quality: %s failed", key)
                failed.add(key)
        else:
            if failed:
                raise SweepRunsFailedError(
                    f"{len(failed)} run(s) failed: {', '.join(sorted(failed))} (tracebacks "
                    f"above); {len(trained)} trained"
                )
            return trained


def train_run(spec: RunSpec, sweep: Sweep) -> dict[str, Any] | None:
    """Train one run in its home and write its result files; None if another process holds it."""
    from data.lock import HomeBusyError, training_lock

    ws = Workspace(sweep.scratch / spec.dataset / spec.name)
    try:
        with training_lock(ws, "bench quality"):
            if is_done(spec, sweep):  # another process finished it meanwhile
                return None
            return _train(spec, sweep, ws)
    except HomeBusyError:
        log.info("bench quality: %s/%s is being trained elsewhere", spec.dataset, spec.name)
        return None


def _train(spec: RunSpec, sweep: Sweep, ws: Workspace) -> dict[str, Any]:
    """Fit, score per user, write `<run>.ndcg.npz` then the record (the record last: done)."""
    from benchmarks.harness.curves import best_epoch_kl, validation_curve
    from benchmarks.harness.paired import per_user_ndcg
    from data.datasets import prepare_dataset
    from model import bundle
    from training.workflows.pipeline import load_splits, train_on

    cfg = run_config(spec, sweep)
    log.info("bench quality: training %s/%s", spec.dataset, spec.name)
    started, clock = records.start(), SamplerClock()
    label = prepare_dataset(ws, sweep.source(spec.dataset))
    splits = load_splits(ws, cfg)
    result = train_on(
        ws, cfg, splits, bundle.new_version_name(), label, export=False, start=clock,
        measured=("val", "test") if sweep.test else ("val",), **sweep.trainer_overrides,
    )  # fmt: skip
    assert result is not None  # one process (`require_valid_grid`): it is rank 0
    folder = sweep.result_path(spec).parent
    folder.mkdir(parents=True, exist_ok=True)
    ndcg = np.zeros(0)
    if sweep.test:
        _, ndcg = per_user_ndcg(Path(str(result.run_dir)))
        np.savez_compressed(folder / f"{spec.name}.ndcg.npz", ndcg=ndcg)
    curve = validation_curve(result.run_dir)
    metrics = {
        "name": spec.name, "dataset": spec.dataset, "label": spec.label,
        "sampler": spec.sampler, "num_negatives": spec.m, "loss": cfg.loss.name,
        "loss_variant": spec.loss is not None,
        "overrides": [*PROTOCOL, *spec.overrides(), *sweep.sets],
        "data_sha256": sweep.fingerprint(spec.dataset),
        "test": result.metrics.get("test"), "val": result.metrics["val"],
        "epochs": result.epochs, "refit_epochs": result.refit_epochs,
        "stopped_by": stopped_by(result, cfg),
        "train_seconds": result.train_seconds, "seconds_per_epoch": result.seconds_per_epoch,
        "sampling_ms_per_step": clock.ms_per_step(), "sampling_calls": clock.calls,
        "proposal_kl": best_epoch_kl({"validation": curve}), "validation": curve,
        "run_dir": result.run_dir,
        "per_user_ndcg": f"{spec.name}.ndcg.npz" if sweep.test else None, "users": len(ndcg),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    return records.save(
        sweep.result_path(spec), training_settings(cfg), metrics, started, root=sweep.out,
        precision=result.precision, device=result.device, threads=result.threads,
    )  # fmt: skip


def stopped_by(result: Any, cfg: Any) -> str:
    """What ended the fit: the time cap, the epoch limit or early stopping."""
    cap = cfg.train.max_minutes
    if cap is not None and result.train_seconds >= 60.0 * cap - result.seconds_per_epoch:
        return "time cap"
    return "max epochs" if result.epochs >= cfg.train.max_epochs else "early stopping"
