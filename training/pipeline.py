"""Train and evaluate orchestration behind `recsys train`, `recsys evaluate` and the benchmarks.

`train()`: dataset into the home (once) -> splits -> model, sampler, loss -> Lightning fit ->
best checkpoint -> full-ranking metrics on val and test -> bundle export -> publish.
`evaluate()`: the same metrics recomputed from a published bundle and the home's splits.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytorch_lightning as pl_lightning
import torch
from pytorch_lightning.callbacks import Callback, EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

from data import owner, store, vocab
from data.errors import RecsysInputError
from data.ingest import (
    SYNTHETIC_SOURCE,
    holds_synthetic_demo,
    ingest_files,
    ingested_sources,
    record_ingested,
)
from data.split import Splits, build_splits
from data.synth import DEFAULT_SYNTHETIC, generate_events, write_events
from data.workspace import Workspace
from training import export
from training.config import RecsysConfig, load_config
from training.datamodule import SequenceDataModule, item_counts
from training.lit_module import RetrievalModule, evaluate_loader
from training.losses import full_softmax, get_loss
from training.model import build_model
from training.progress import EpochBar, EpochProgress
from training.samplers import SamplerContext, build_sampler

log = logging.getLogger(__name__)

FULL = "full"
MONITOR = "val/ndcg@10"
LOG_SUFFIXES = (".csv", ".parquet", ".pq", ".ndjson", ".jsonl")
DATASETS_ENV_VAR = "RECSYS_DATASETS"


@dataclass
class TrainResult:
    """What `train()` did; `to_json()` is the `recsys train --json` payload."""

    version: str
    dataset: str
    sampler: str
    num_negatives: int | None
    metrics: dict[str, dict[str, float]]
    train_seconds: float
    epochs: int
    seconds_per_epoch: float
    device: str
    threads: int
    bundle: str | None = None
    run_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """All fields as a JSON-ready dict."""
        return asdict(self)


def _fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _ingest_once(ws: Workspace, files: list[Path], source: str | None = None) -> None:
    """Ingest `files` unless the same contents were ingested into this home before.

    `ingested.json` records each file's sha256 with its `source` (default: the file's path).
    """
    prints = {str(f): _fingerprint(f) for f in files}
    seen = ingested_sources(ws)
    if all(fp in seen for fp in prints.values()) and store.has_events(ws):
        log.info("dataset already ingested into %s; not ingesting again", ws.root)
        return
    report = ingest_files(ws, files)
    log.info("ingested %d events (%d rejected)", report.accepted, report.rejected)
    record_ingested(ws, {fp: source or name for name, fp in prints.items()})


def _dataset_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "interactions.csv").is_file():
        return [path / "interactions.csv"]
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in LOG_SUFFIXES)
    if not files:
        raise RecsysInputError(f"{path}: no log files (.csv, .parquet, .ndjson) in the folder")
    return files


def _ingest_titles(ws: Workspace, folder: Path) -> None:
    items = folder / "items.csv"
    if items.is_file():
        titles = pl.read_csv(items, infer_schema_length=0)
        if {"item_id", "title"} <= set(titles.columns):
            vocab.save_item_titles(ws, titles.select("item_id", "title"))


def datasets_root() -> Path:
    """Where dataset names are looked up: `$RECSYS_DATASETS`, else `../shared/datasets`."""
    default = Path(__file__).resolve().parents[2] / "shared" / "datasets"  # beside the repo
    return Path(os.environ.get(DATASETS_ENV_VAR) or default)


def _dataset_path(dataset: str) -> Path:
    """A log file or folder given by path, or by name under `datasets_root()`."""
    path = Path(dataset).expanduser()
    if path.exists():
        return path
    named = datasets_root() / dataset
    if "/" not in dataset and named.exists():
        return named
    raise RecsysInputError(
        f"--dataset {dataset}: no such file or folder (nor a dataset name in {datasets_root()})"
    )


def prepare_dataset(ws: Workspace, dataset: str | None) -> str:
    """Make sure the home has events; return the dataset's name for the manifest.

    Synthetic demo events and real ones never share a home (`data.ingest` refuses to add real
    logs to a demo home; `_synthetic_demo` refuses to add the demo to a home with events).

    Args:
        ws: The home.
        dataset: None (the home's events), "synthetic" (the generated demo log), a log file /
            folder, or a folder's name under `datasets_root()` (ingested once; a folder's
            `items.csv` gives titles).

    Raises:
        RecsysInputError: no dataset and no events; the path does not exist or holds no logs;
            the dataset would mix synthetic and real events.

    """
    if dataset is None:
        if not store.has_events(ws):
            raise RecsysInputError(
                f"{ws.root} has no events: ingest logs (`recsys ingest FILE`), or pass --dataset "
                "with a log file, folder or dataset name, or --dataset synthetic for a generated "
                "demo log"
            )
        return "synthetic" if holds_synthetic_demo(ws) else "workspace"
    if dataset == "synthetic":
        return _synthetic_demo(ws)
    path = _dataset_path(dataset)
    _ingest_once(ws, _dataset_files(path))
    if path.is_dir():
        _ingest_titles(ws, path)
    return path.stem if path.is_file() else path.name


def _synthetic_demo(ws: Workspace) -> str:
    """Generate and ingest the demo log into a home with no events (once); "synthetic"."""
    if holds_synthetic_demo(ws):
        return "synthetic"
    if store.has_events(ws):
        raise RecsysInputError(
            f"{ws.root} holds real events: synthetic demo events would mix with them; "
            "use a separate --home for the demo"
        )
    name = "events-{users}-{items}-{events}.csv".format(**DEFAULT_SYNTHETIC)
    synth = ws.root / "synthetic" / name
    if not synth.exists():
        synth.parent.mkdir(parents=True, exist_ok=True)
        spec = DEFAULT_SYNTHETIC
        frame = generate_events(spec["users"], spec["items"], spec["events"], seed=0)
        write_events(frame, str(synth))
    _ingest_once(ws, [synth], source=SYNTHETIC_SOURCE)
    return "synthetic"


class EpochTimer(Callback):
    """Wall seconds of each training epoch, its validation round included.

    Lightning runs an epoch's validation before `on_train_epoch_end`. Each validation round
    also logs `time/fit_seconds`, the wall time since the fit started (quality against time).
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = self._fit_start = 0.0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the fit's clock."""
        self._fit_start = time.perf_counter()

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the clock."""
        self._start = time.perf_counter()

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Log the wall time of this validation round's end since the fit started."""
        if not trainer.sanity_checking:
            pl_module.log("time/fit_seconds", time.perf_counter() - self._fit_start)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Stop the clock."""
        self.seconds.append(time.perf_counter() - self._start)


def build_module(cfg: RecsysConfig, n: int, counts: torch.Tensor) -> RetrievalModule:
    """Model, sampler (None for `sampler.name == "full"`) and loss, wired into the module.

    Args:
        cfg: The run's configuration.
        n: Catalogue size (item_idx 1..n).
        counts: `[n + 1]` training interaction counts per item_idx (popularity, log-q).

    """
    if cfg.sampler.name == FULL and cfg.train.sparse_embeddings:
        raise RecsysInputError(
            "full softmax touches every item row: use train.sparse_embeddings=false"
        )
    model = build_model(cfg.model, n, sparse=cfg.train.sparse_embeddings)
    if cfg.sampler.name == FULL:
        return RetrievalModule(model, cfg, None, full_loss=full_softmax)
    ctx = SamplerContext(n, counts, cfg.model.temperature)
    sampler = build_sampler(cfg.sampler, ctx)
    return RetrievalModule(model, cfg, sampler, sampled_loss=get_loss(cfg.loss.name))


def _trainer(cfg: RecsysConfig, run_dir: Path, **overrides: Any) -> pl_lightning.Trainer:
    ckpt = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename="best", monitor=MONITOR, mode="max"
    )
    stop = EarlyStopping(monitor=MONITOR, mode="max", patience=cfg.train.patience)
    loggers = [
        CSVLogger(run_dir.parent, name=run_dir.name, version=""),
        TensorBoardLogger(run_dir.parent, name=run_dir.name, version=""),
    ]
    kwargs: dict[str, Any] = {
        "max_epochs": cfg.train.max_epochs,
        "max_time": {"minutes": cfg.train.max_minutes} if cfg.train.max_minutes else None,
        "check_val_every_n_epoch": cfg.train.val_every,
        "accelerator": cfg.train.accelerator,
        "devices": 1,
        "callbacks": [
            ckpt,
            stop,
            EpochTimer(),
            EpochProgress(cfg.train.max_epochs, cfg.train.max_minutes),
            *([EpochBar()] if sys.stderr.isatty() else []),  # a bar in a log file is noise
        ],
        "enable_progress_bar": sys.stderr.isatty(),
        "logger": loggers,
        "num_sanity_val_steps": 0,
        "enable_model_summary": False,
        "log_every_n_steps": 10,
    }
    kwargs.update(overrides)
    return pl_lightning.Trainer(**kwargs)


def _load_checkpoint(module: RetrievalModule, path: Path | str) -> None:
    """Load a Lightning checkpoint's weights into `module` (on the module's device)."""
    state = torch.load(path, map_location=module.device, weights_only=False)
    module.load_state_dict(state["state_dict"])


def _restore_best(trainer: pl_lightning.Trainer, module: RetrievalModule) -> None:
    ckpt = next(c for c in trainer.callbacks if isinstance(c, ModelCheckpoint))  # type: ignore[attr-defined]
    if ckpt.best_model_path:
        _load_checkpoint(module, ckpt.best_model_path)


def load_run(run_dir: Path) -> tuple[RecsysConfig, Splits, RetrievalModule]:
    """A finished run `HOME/runs/NAME`: its config, its home's splits, its best module.

    The config is the run's `hparams.yaml`; the splits are rebuilt from HOME's events as the
    config defines them; the module (eval mode, CPU) holds `checkpoints/best.ckpt`.
    """
    cfg = load_config([run_dir / "hparams.yaml"], [])
    ws = Workspace(run_dir.parent.parent)
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    _load_checkpoint(module, run_dir / "checkpoints" / "best.ckpt")
    return cfg, splits, module.eval()


def _fit(
    cfg: RecsysConfig, splits: Splits, run_dir: Path, overrides: dict[str, Any]
) -> tuple[RetrievalModule, SequenceDataModule, pl_lightning.Trainer, float]:
    """Seed, build, fit, and restore the best checkpoint; returns the fit's wall seconds."""
    if cfg.train.threads is not None:
        torch.set_num_threads(cfg.train.threads)
    pl_lightning.seed_everything(cfg.train.seed, workers=True, verbose=False)
    dm = SequenceDataModule(
        splits, cfg.model.max_len, cfg.train.batch_size, cfg.train.eval_batch_size,
        cfg.train.num_workers, cfg.train.bucket_by_length, cfg.train.seed, cfg.train.val_users,
    )  # fmt: skip
    module = build_module(cfg, splits.num_items, item_counts(splits))
    trainer = _trainer(cfg, run_dir, **overrides)
    for logger in trainer.loggers:
        logger.log_hyperparams(cfg.model_dump())
    start = time.perf_counter()
    trainer.fit(module, datamodule=dm)
    seconds = time.perf_counter() - start
    _restore_best(trainer, module)
    return module, dm, trainer, seconds


def _items_frame(ws: Workspace, splits: Splits) -> pl.DataFrame:
    counts = item_counts(splits).to(torch.int64).numpy()
    titles = vocab.load_item_titles(ws)
    items = vocab.load_item_vocab(ws).select("item_idx", "item_id").sort("item_idx")
    items = items.filter(pl.col("item_idx") <= splits.num_items)
    return items.with_columns(
        pl.Series("popularity", counts[items["item_idx"].to_numpy()], dtype=pl.Int64),
        pl.col("item_id")
        .replace_strict(titles, default=None, return_dtype=pl.String)
        .alias("title"),
    )


def train(
    ws: Workspace,
    cfg: RecsysConfig,
    *,
    dataset: str | None = None,
    version: str | None = None,
    publish: bool = True,
    **trainer_overrides: Any,
) -> TrainResult:
    """Train, evaluate the best checkpoint on val and test, export and publish the bundle.

    Args:
        ws: The home (events, runs, models).
        cfg: The run config; `sampler.name == "full"` trains with the full softmax.
        dataset: See `prepare_dataset`.
        version: Bundle name (default: a new sortable name); also the run id.
        publish: Write the bundle and point `CURRENT` at it (False: metrics only).
        **trainer_overrides: Extra `pl.Trainer` arguments (tests: limit_train_batches...).

    """
    if 10 not in cfg.eval.ks:
        raise RecsysInputError("eval.ks must include 10: checkpoints are chosen on val/ndcg@10")
    version = version or export.new_version_name()
    export.check_version_name(version)
    if publish and (ws.models_dir / version).exists():
        raise RecsysInputError(f"model version {version!r} already exists")
    label = prepare_dataset(ws, dataset)
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore)
    if splits.val.height == 0 or splits.test.height == 0:
        raise RecsysInputError("no validation or test examples: users need at least 3 events")
    run_dir = ws.runs_dir / version
    owner.claim(ws.run_owner_path(version))  # a killed run is left unfinished: `recsys clean`
    module, dm, trainer, seconds = _fit(cfg, splits, run_dir, trainer_overrides)
    metrics = {
        split: evaluate_loader(
            module.model.query_tower, module.model.item_tower.all_embeddings().detach(),
            dm.eval_dataloader(split), cfg.model.temperature, cfg, module.device,
            absolute=cfg.ranks_by_magnitude,
        )
        for split in ("val", "test")
    }  # fmt: skip
    timer = next(c for c in trainer.callbacks if isinstance(c, EpochTimer))  # type: ignore[attr-defined]
    result = TrainResult(
        version=version,
        dataset=label,
        sampler=cfg.sampler.name,
        num_negatives=cfg.sampler.num_negatives if cfg.sampler.name != FULL else None,
        metrics=metrics,
        train_seconds=round(seconds, 3),
        epochs=len(timer.seconds),
        seconds_per_epoch=round(sum(timer.seconds) / max(len(timer.seconds), 1), 3),
        device=str(module.device),
        threads=torch.get_num_threads(),
        run_dir=str(run_dir),
    )
    if publish:
        result.bundle = str(_export(ws, cfg, module, splits, result))
        export.publish(ws.models_dir, version)
    owner.finish(ws.run_owner_path(version))
    return result


def _export(
    ws: Workspace, cfg: RecsysConfig, module: RetrievalModule, splits: Splits, res: TrainResult
) -> Path:
    model = module.model.cpu().eval()
    emb = model.item_tower.all_embeddings().detach().numpy()
    manifest = {
        "dataset": res.dataset,
        "temperature": cfg.model.temperature,
        "score": export.ABS_DOT if cfg.ranks_by_magnitude else export.DOT,
        "sampler": {"name": res.sampler, "num_negatives": res.num_negatives},
        "config": cfg.model_dump(),
        "metrics": res.metrics,
        "train_seconds": res.train_seconds,
        "epochs": res.epochs,
    }
    return export.write_bundle(
        ws.models_dir, res.version, query_tower=model.query_tower,
        model_cfg=cfg.model.model_dump(), num_items=splits.num_items, item_embeddings=emb,
        items=_items_frame(ws, splits), manifest=manifest,
    )  # fmt: skip


def _within_catalogue(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """Drop rows whose target the bundle does not know; blank unknown history items."""
    history = pl.col("history").list.eval(
        pl.when(pl.element() <= n).then(pl.element()).otherwise(0)
    )
    return frame.filter(pl.col("target") <= n).with_columns(history)


def evaluate(ws: Workspace, version: str | None = None, split: str = "test") -> dict[str, Any]:
    """Recompute full-ranking metrics from a bundle and the home's current splits.

    Raises:
        RecsysInputError: bad split name, nothing published / no such version.

    """
    if split not in ("val", "test"):
        raise RecsysInputError(f"--split must be val or test, got {split!r}")
    bundle = export.resolve_bundle(ws.models_dir, version)
    manifest = export.read_manifest(bundle)
    cfg = RecsysConfig.model_validate(manifest["config"])
    n = int(manifest["num_items"])
    splits = build_splits(ws, cfg.data.split, cfg.data.cutoff, cfg.data.kcore)
    frame = _within_catalogue(splits.val if split == "val" else splits.test, n)
    dm = SequenceDataModule(
        Splits(splits.train.clear(), frame, frame, n),
        cfg.model.max_len,
        1,
        cfg.train.eval_batch_size,
    )
    tower = export.load_query_tower(bundle, manifest)
    item_emb = torch.from_numpy(export.load_item_embeddings(bundle))
    metrics = evaluate_loader(
        tower,
        item_emb,
        dm.eval_dataloader(split),
        float(manifest["temperature"]),
        cfg,
        absolute=manifest.get("score", export.DOT) == export.ABS_DOT,
    )
    return {"version": manifest["version"], "split": split, "examples": frame.height,
            "metrics": metrics}  # fmt: skip
