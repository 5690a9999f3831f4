"""`recsys retrain`: new logs in, a warm-started candidate out, published behind a quality gate.

One retrain, top to bottom (`retrain()`):
1. take the home's training lock (a second training or retrain is refused, its holder named);
2. ingest the new logs once (a file ingested before, by sha256, is not read again);
3. record the attempt in `retrain.json` (`training.workflows.journal`: inputs' key, version, the
   event parts and item count it trains on, counts) so that the same command after a crash resumes
   the same run, on the same events, from its `last.ckpt` instead of starting over; a new
   attempt in which no stored event is new to the served model (its manifest lists the parts
   it saw) stops there: nothing to learn (a scheduled retrain over a folder with no new logs),
   unless `--full` or `--force`;
4. split those events (or those since `--since`), warm-start from the served model
   (`training.workflows.warm_start`) unless `--full`, fit, rank the kept round on the gate's val
   rows,
   refit it on the val events too (as `recsys train` does; a warm start's epochs are
   `retrain.refit_epochs`), write the candidate bundle;
5. gate (`training.workflows.gate`): the candidate's kept round's and the served model's val NDCG@10
   on the same rows, paired row by row; refuse only when the candidate is worse by more than
   `retrain.tolerance` at `retrain.confidence`, else publish (`--force`: always), when the
   served model is still the one it was gated against.
A SIGKILL anywhere leaves the served model as it was: `CURRENT` changes only in step 5, by an
atomic rename.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import torch

from data import owner, store, vocab
from data.datasets import dataset_files, fingerprint, ingest_once
from data.errors import RecsysInputError
from data.ingest import DEFAULT_LAYOUT, IngestReport, LogLayout
from data.lock import training_lock
from data.split import Splits
from data.workspace import Workspace
from model import bundle
from training import distributed
from training.config import RecsysConfig
from training.config_loading import stored_config
from training.loop.checkpoints import final_checkpoint
from training.workflows import journal as journal_file
from training.workflows import warm_start
from training.workflows.gate import RetrainResult, gate_and_publish, gate_rows, nothing_new
from training.workflows.pipeline import load_splits, train_on
from training.workflows.warm_start import WarmStart


@dataclass
class RetrainRequest:
    """The command's inputs (see `recsys retrain --help`)."""

    logs: list[Path]
    full: bool = False
    force: bool = False
    since: int | None = None
    max_epochs: int | None = None
    layout: LogLayout = DEFAULT_LAYOUT


# of the machine, not the model (precision: auto picks what this machine multiplies natively)
HARDWARE = ("accelerator", "devices", "num_nodes", "strategy", "precision")


def served_config(models_dir: Path) -> dict[str, Any] | None:
    """The served model's config (a retrain's base), or None when nothing is published.

    The served run's `train.accelerator`, `devices`, `num_nodes`, `strategy` and `precision`
    are left out: they describe the machine it ran on (a retrain runs in one process, perhaps
    elsewhere, in the precision that machine multiplies natively by default).
    """
    version = bundle.current_version(models_dir)
    if version is None:
        return None
    config = stored_config(bundle.read_manifest(models_dir / version).run_config())
    if isinstance(config.get("train"), dict):
        config["train"] = {k: v for k, v in config["train"].items() if k not in HARDWARE}
    return config


def retrain(
    ws: Workspace, cfg: RecsysConfig, request: RetrainRequest, **trainer_overrides: Any
) -> RetrainResult:
    """Ingest `request.logs`, train a candidate, publish it if it passes the gate.

    Args:
        ws: The home.
        cfg: The run config: the served model's, with the user's files and `--set` on top.
        request: Logs and flags.
        **trainer_overrides: Extra `pl.Trainer` arguments (tests).

    Raises:
        RecsysInputError: a log is missing or unreadable; the home is busy (HomeBusyError);
            the model cannot be warm-started (a changed shape without --full).

    """
    distributed.require_one_process(cfg.train.devices, cfg.train.num_nodes, "retrain")
    files = [f for log in request.logs for f in dataset_files(_existing(log))]
    with training_lock(ws, "retrain"):
        previous = bundle.current_version(ws.models_dir)
        if request.max_epochs == 0 and previous is None:  # no gate either: it would publish
            raise RecsysInputError(
                "--max-epochs 0 keeps the warm start untrained, and nothing is served to start "
                "from: the model would be random; train with epochs"
            )
        journal = _resume_or_ingest(ws, files, previous, cfg, request)
        if journal.get("nothing_new"):
            return nothing_new(journal)
        version = journal["version"]
        splits = _attempt_splits(ws, cfg, request.since, journal)
        served = _load(ws, journal["previous_version"])
        rows = gate_rows(splits.val, served, _users_unseen_by_served(ws, served, journal))
        if not (ws.models_dir / version).is_dir():
            _train_candidate(ws, cfg, splits, rows, journal, served, request, trainer_overrides)
        else:  # killed after its export: the run is done, whatever its owner record says
            owner.finish(ws.run_owner_path(version))
        result = gate_and_publish(ws, cfg.retrain, cfg.eval, rows, journal, served, request.force)
        journal_file.remove(ws)
    return result


def _existing(path: Path) -> Path:
    if not path.exists():
        raise RecsysInputError(f"--logs {path}: no such file or folder")
    return path


def _journal_key(prints: list[str], previous: str | None, cfg: RecsysConfig, req: Any) -> str:
    """What makes two retrain commands the same attempt (a re-run after a crash resumes it)."""
    parts = [sorted(prints), previous, cfg.model_dump(), req.full, req.since, req.max_epochs]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _resume_or_ingest(
    ws: Workspace, files: list[Path], previous: str | None, cfg: RecsysConfig, req: RetrainRequest
) -> dict[str, Any]:
    """The journal of this attempt: resumed if a killed run of the same command left one.

    A new attempt with nothing the served model has not seen (and neither --full nor --force)
    is not written: it comes back marked `nothing_new`. A resumed one always goes on.
    """
    prints = [fingerprint(f) for f in files]
    journal = journal_file.read(ws)
    if journal is not None:
        # killed after publishing: CURRENT already names the attempt's own version
        base = journal.get("previous_version") if journal.get("version") == previous else previous
        if journal.get("key") == _journal_key(prints, base, cfg, req):
            return journal
    key = _journal_key(prints, previous, cfg, req)
    report = ingest_once(ws, files, layout=req.layout)
    served = bundle.read_manifest(ws.models_dir / previous) if previous else None
    # what this attempt trains on, so that a resumed one reads the same events and items: the
    # parts first, then the items (a part committed in between only adds unused item rows)
    parts = [p.stem.removeprefix("part-") for p in store.part_paths(ws)]
    items = vocab.load_item_vocab(ws).height
    journal = {
        "key": key,
        "version": bundle.new_version_name(),
        "previous_version": previous,
        "parts": parts,
        "num_items": items,
        "new_items": items - (served.num_items if served else 0),
        **_unseen_by_served(ws, served, parts, report),
        "rejected": report.rejected if report else 0,
    }
    # nothing new by the served model's own list of the parts it saw (older bundles have none)
    saw_all = served is not None and served.events is not None and journal["new_events"] == 0
    if saw_all and not (req.force or req.full):
        return {**journal, "nothing_new": True}  # no attempt: no journal to resume
    journal_file.write(ws, journal)
    return journal


def _unseen_by_served(
    ws: Workspace, served: bundle.Manifest | None, parts: list[str], report: IngestReport | None
) -> dict[str, int]:
    """`new_events` and `new_users`: in the event parts the served model was not trained on.

    Counted against the served bundle's parts, not this attempt's ingest, so that a retrain run
    again with other settings (say `--full` after a refused warm start) reports the same. A
    bundle from before manifests listed their parts: the parts other than this ingest's.
    `served` is the served bundle's manifest (None when nothing is served).
    """
    seen = served.events if served else []
    if seen is None:
        seen = [name for name in parts if report is None or name != report.ingest_id]
    paths, trained_on = {name: store.part_path(ws, name) for name in parts}, frozenset(seen)
    fresh = store.read_events(ws, [paths[n] for n in parts if n not in trained_on])
    known = store.read_events(ws, [paths[n] for n in seen if n in paths]).select("user_id")
    users = fresh.select("user_id").unique().join(known.unique(), on="user_id", how="anti")
    return {
        "new_events": int(fresh.select(pl.len()).collect().item()),
        "new_users": int(users.select(pl.len()).collect().item()),
    }


def _users_unseen_by_served(
    ws: Workspace, served: bundle.ModelBundle | None, journal: dict[str, Any]
) -> pl.Series:
    """user_idx of the users with events in the attempt's parts the served model did not see."""
    seen = set((served.manifest.events or []) if served else [])
    parts = journal.get("parts") or [p.stem.removeprefix("part-") for p in store.part_paths(ws)]
    fresh = store.read_events(ws, [store.part_path(ws, n) for n in parts if n not in seen])
    users = vocab.load_user_vocab(ws).lazy().select("user_id", "user_idx")
    return fresh.select("user_id").unique().join(users, on="user_id").collect()["user_idx"]


def _attempt_splits(
    ws: Workspace, cfg: RecsysConfig, since: int | None, journal: dict[str, Any]
) -> Splits:
    """The splits of the events and items the attempt saw when it started.

    A journal from before they were recorded: everything stored now.
    """
    parts = journal.get("parts")
    splits = load_splits(ws, cfg, since, parts=None if parts is None else tuple(parts))
    items = journal.get("num_items")
    return splits if items is None else dataclasses.replace(splits, num_items=int(items))


def _load(ws: Workspace, version: str | None) -> bundle.ModelBundle | None:
    return bundle.ModelBundle.load(ws.models_dir / version) if version else None


def _train_candidate(
    ws: Workspace,
    cfg: RecsysConfig,
    splits: Splits,
    rows: pl.DataFrame,
    journal: dict[str, Any],
    served: bundle.ModelBundle | None,
    req: RetrainRequest,
    overrides: dict[str, Any],
) -> None:
    """Fit (warm unless --full or nothing is served) and write the candidate bundle.

    Its kept round is ranked on the gate's `rows` before the refit trains on them.
    """
    start = None if req.full or served is None else served_warm_start(ws, cfg, splits, served)
    warm = start is not None  # its own stopping and refit; `--full`: a training's
    patience = cfg.retrain.patience if warm else None
    refit_epochs = cfg.retrain.refit_epochs if warm else None
    overrides = {**overrides, **_fit_epochs(cfg, req, warm)}
    label = served.manifest.dataset if served else "workspace"
    origin = bundle.RetrainOrigin(
        previous_version=journal["previous_version"], warm_start=warm, since=req.since
    )
    train_on(
        ws, cfg, splits, journal["version"], label, start=start, resumable=True,
        patience=patience, refit_epochs=refit_epochs, retrain=origin, gate_rows=rows,
        **overrides,
    )  # fmt: skip


def _fit_epochs(cfg: RecsysConfig, req: RetrainRequest, warm: bool) -> dict[str, int]:
    """The fit's epoch cap as a Trainer override ({}: none).

    `--max-epochs` 0: no fit. A warm fit: `retrain.max_epochs`, unless `--max-epochs` set
    `train.max_epochs` (the Trainer's default, as `--full` uses it).
    """
    if req.max_epochs == 0:
        return {"max_epochs": 0}
    if warm and req.max_epochs is None and cfg.retrain.max_epochs is not None:
        return {"max_epochs": min(cfg.train.max_epochs, cfg.retrain.max_epochs)}
    return {}


def served_warm_start(
    ws: Workspace, cfg: RecsysConfig, splits: Splits, served: bundle.ModelBundle
) -> WarmStart:
    """A warm start from the served bundle's run (its final checkpoint, if kept) on `splits`."""
    ckpt_path = final_checkpoint(ws.runs_dir / served.manifest.version)  # the served weights
    checkpoint = None
    if ckpt_path.is_file():
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    old_items = served.manifest.num_items
    contexts = warm_start.new_item_contexts(splits.train, old_items, cfg.model.max_len)
    return warm_start.from_served(served, checkpoint, cfg.retrain, contexts)
