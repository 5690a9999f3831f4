"""Which tapas settings train best: correction and temperature schedule, on synthetic data.

Usage: python -m benchmarks.studies.tapas_settings [--out FILE]

The data and model of tests/training/test_samplers_learn.py (a synthetic log of 500 users,
600 items, 12,000 events with planted sequential structure; d = 32, L = 20, B = 64), m = 16
negatives, 8 epochs, seeds 0 and 1; full-ranking validation Recall@10, NDCG@10 and full
cross-entropy, averaged over the seeds. uniform and popularity are the references. The
tapas temperature anneals over the 8 epochs where a final temperature is given.
"""

import argparse
import logging
import tempfile
from pathlib import Path

import pytorch_lightning as pl
import torch

from benchmarks import records
from benchmarks.paths import RESULTS
from data.ingest import ingest_files
from data.split import Splits, build_splits
from data.synth import generate_events
from data.workspace import Workspace
from model.build import build_model
from training.config_loading import load_config
from training.evaluation.ranking import evaluate_loader
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.lit_module import RetrievalModule
from training.losses import get_loss
from training.sampler_settings import SampledSettings
from training.samplers import SamplerContext, build_sampler

# the model and temperature of the committed results (the defaults then)
TINY = ["model.tower=sasrec", "model.dim=32", "model.max_len=20", "model.dropout=0.1",
        "train.batch_size=64", "model.normalize=true", "model.temperature=0.05"]  # fmt: skip
TAU = {
    "tau 0.05": ["sampler.temperature_final=null", "sampler.temperature=0.05"],
    "tau 1 -> 0.05": ["sampler.temperature=1.0", "sampler.temperature_final=0.05"],
    "tau 0.2": ["sampler.temperature_final=null", "sampler.temperature=0.2"],
}
GRID = {
    "uniform": ["sampler.name=uniform"],
    "popularity": ["sampler.name=popularity"],
    "tapas r1 none": ["sampler.name=tapas", "sampler.ratio=1",
                      "sampler.correction=none", *TAU["tau 0.05"]],
    **{
        f"tapas r8 {corr} {tau}": ["sampler.name=tapas", f"sampler.correction={corr}", *sets]
        for tau, sets in TAU.items()
        for corr in ("none", "presample")
    },
}  # fmt: skip


def _splits() -> Splits:
    home = Path(tempfile.mkdtemp())
    log = home / "log.csv"
    generate_events(500, 600, 12000, seed=1).write_csv(log)
    ws = Workspace(home)
    ingest_files(ws, [log])
    return build_splits(ws)


def run(splits: Splits, extra: list[str], seed: int) -> dict[str, float]:
    """Validation metrics of one 8-epoch training of the tiny model with `extra` settings."""
    cfg = load_config(overrides=[*TINY, "sampler.num_negatives=16", "train.lr=0.005", *extra])
    torch.manual_seed(seed)
    counts = item_counts(splits)
    model = build_model(cfg.model, splits.num_items, sparse=False)
    ctx = SamplerContext(splits.num_items, counts, cfg.model.temperature)
    assert isinstance(cfg.sampler, SampledSettings)  # every setting of the grid draws negatives
    module = RetrievalModule(model, cfg, build_sampler(cfg.sampler, ctx), get_loss(cfg.loss.name))
    pl.seed_everything(seed, verbose=False)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size)  # one per position
    pl.Trainer(
        max_epochs=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
        accelerator="cpu",
    ).fit(module, datamodule=dm)  # fmt: skip
    emb = module.model.item_tower.all_embeddings().detach()
    tower = module.model.query_tower
    temperature = cfg.model.temperature
    return evaluate_loader(tower, emb, dm.val_dataloader(), temperature, cfg, absolute=False)


def main() -> None:
    """Train every setting of the grid with both seeds; keep their mean metrics as a record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "tapas_settings/tapas_settings.json")
    args = parser.parse_args()
    started = records.start()
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    splits = _splits()
    out = {}
    for name, extra in GRID.items():
        runs = [run(splits, extra, seed) for seed in (0, 1)]
        keys = ("recall@10", "ndcg@10", "full_ce")
        out[name] = {k: round(sum(r[k] for r in runs) / len(runs), 4) for k in keys}
        print(name, out[name], flush=True)
    config = {"grid": GRID, "tiny": TINY, "seeds": [0, 1], "epochs": 8}
    records.save(args.out, config, out, started, threads=1)


if __name__ == "__main__":
    main()
