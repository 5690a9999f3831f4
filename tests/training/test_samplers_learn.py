"""A short synthetic training run per new sampler learns: it beats popularity clearly."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from data.ingest import ingest_files
from data.split import Splits, build_splits
from data.synth import generate_events
from data.workspace import Workspace
from model.build import build_model
from training.config_loading import load_config
from training.evaluation.metrics import popularity_baseline
from training.evaluation.ranking import evaluate_loader
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.lit_module import RetrievalModule
from training.losses import get_loss
from training.samplers import SamplerContext, build_sampler

TINY = ["model.dim=32", "model.max_len=20", "model.dropout=0.1", "train.batch_size=64"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> Splits:
    home = tmp_path_factory.mktemp("home")
    log = home / "log.csv"
    generate_events(500, 600, 12000, seed=1).write_csv(log)
    ws = Workspace(home)
    ingest_files(ws, [log])
    return build_splits(ws)


@pytest.mark.parametrize(
    ("sampler", "loss", "extra"),
    [
        ("tapas", "sampled_softmax", []),
        ("tapas", "sampled_softmax", ["sampler.shards=4", "sampler.correction=none"]),
        ("tapas", "sampled_softmax", ["sampler.first_pass=midx", "sampler.codewords=8"]),
        ("bernoulli", "bernoulli", []),
    ],
    ids=["tapas", "tapas-sharded-uncorrected", "tapas-midx-first-pass", "bernoulli"],
)  # fmt: skip
def test_short_run_beats_popularity(splits: Splits, sampler: str, loss: str, extra) -> None:
    cfg = load_config(
        overrides=[*TINY, f"sampler.name={sampler}", f"loss.name={loss}",
                   "sampler.num_negatives=16", "train.lr=0.005", *extra]
    )  # fmt: skip
    torch.manual_seed(0)
    counts = item_counts(splits)
    model = build_model(cfg.model, splits.num_items, sparse=False)
    ctx = SamplerContext(splits.num_items, counts, cfg.model.temperature)
    module = RetrievalModule(model, cfg, build_sampler(cfg.sampler, ctx), get_loss(loss))
    pl.seed_everything(0, verbose=False)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size)
    pl.Trainer(
        max_epochs=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
        accelerator="cpu",
    ).fit(module, datamodule=dm)  # fmt: skip
    emb = module.model.item_tower.all_embeddings().detach()
    got = evaluate_loader(
        module.model.query_tower,
        emb,
        dm.test_dataloader(),
        cfg.model.temperature,
        cfg,
        absolute=False,
    )
    batch = dm.test_set[list(range(len(dm.test_set)))]
    base = popularity_baseline(counts, batch["target"], batch["seen"], ks=(10,))
    assert got["recall@10"] > 2 * base["recall@10"] + 0.05, (got, base)
