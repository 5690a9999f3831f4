"""LightningModule: learns planted synthetic structure, keeps samplers in sync, all paths run."""

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from data.errors import RecsysInputError
from data.ingest import ingest_files
from data.split import Splits, build_splits
from data.synth import generate_events
from data.workspace import Workspace
from model.build import build_model
from training.config import RecsysConfig
from training.config_loading import load_config
from training.evaluation.metrics import popularity_baseline
from training.evaluation.ranking import evaluate_loader, rank_loader
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.lit_module import RetrievalModule
from training.loop.module_build import build_module
from training.losses import get_loss
from training.sampler_settings import SETTINGS, TracksTheTable
from training.samplers import SAMPLERS, SamplerContext, build_sampler

TINY = ["model.dim=32", "model.max_len=20", "model.dropout=0.1", "train.batch_size=64"]
UNIT = ["model.normalize=true", "model.temperature=0.1"]  # what the kernel samplers follow


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> Splits:
    home = tmp_path_factory.mktemp("home")
    ws = Workspace(home)
    log = home / "log.csv"
    generate_events(500, 600, 12000, seed=1).write_csv(log)
    ingest_files(ws, [log])
    return build_splits(ws)


def _fit(cfg: RecsysConfig, splits: Splits, module: RetrievalModule, epochs: int, **kw) -> None:
    pl.seed_everything(0, verbose=False)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size)
    trainer = pl.Trainer(
        max_epochs=epochs, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
        accelerator="cpu", **kw,
    )  # fmt: skip
    trainer.fit(module, datamodule=dm)


def _test_metrics(cfg: RecsysConfig, splits: Splits, module: RetrievalModule) -> dict:
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size)
    emb = module.model.item_tower.all_embeddings().detach()
    loader = dm.test_dataloader()
    return evaluate_loader(
        module.model.query_tower, emb, loader, cfg.model.temperature, cfg, absolute=False
    )


def test_short_run_beats_popularity_clearly(splits: Splits) -> None:
    cfg = load_config(
        overrides=[*TINY, "sampler.name=uniform", "sampler.num_negatives=64", "train.lr=0.005"]
    )
    torch.manual_seed(0)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    _fit(cfg, splits, module, epochs=8, limit_val_batches=0)
    _assert_beats_popularity_clearly(cfg, splits, module)


def _assert_beats_popularity_clearly(
    cfg: RecsysConfig, splits: Splits, module: RetrievalModule
) -> None:
    got = _test_metrics(cfg, splits, module)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size)
    batch = dm.test_set[list(range(len(dm.test_set)))]
    base = popularity_baseline(item_counts(splits), batch["target"], batch["seen"], ks=(10,))
    assert got["recall@10"] > 2 * base["recall@10"] + 0.05, (got, base)


@pytest.mark.parametrize("sampler", ["full", "uniform"])
def test_a_dot_product_model_learns(splits: Splits, sampler: str) -> None:
    plain = ["model.normalize=false", "model.temperature=1.0", "train.lr=0.005"]
    cfg = load_config(overrides=[*TINY, *plain, f"sampler.name={sampler}"])
    torch.manual_seed(0)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    _fit(cfg, splits, module, epochs=8, limit_val_batches=0)
    norms = module.model.item_tower.all_embeddings()[1:].norm(dim=-1)
    assert norms.std() > 0.05  # the rows are not unit vectors
    _assert_beats_popularity_clearly(cfg, splits, module)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["model.normalize=false", "sampler.name=quadratic"], "use model.normalize=true"),
        (["model.normalize=false", "sampler.name=rff"], "use model.normalize=true"),
        (["loss.name=nce", "sampler.name=in-batch"], "negatives are the batch's positives"),
        (["loss.name=nce", "sampler.name=mixed"], "negatives are the batch's positives"),
        (["loss.name=bernoulli", "sampler.name=uniform"], "use sampler.name=bernoulli"),
        (["loss.name=bernoulli", "sampler.name=popularity"], "draws with repeats"),
        (["model.learn_temperature=true", "sampler.name=exact"], "starting temperature"),
        (["model.learn_temperature=true", *UNIT, "sampler.name=quadratic"], "starting temperature"),
        (["model.temperature_final=0.05", "sampler.name=exact"], "temperature_final moves"),
        (
            ["model.temperature_final=0.05", *UNIT, "sampler.name=quadratic"],
            "temperature_final moves",
        ),
        (
            [
                "model.temperature_final=0.05",
                "sampler.name=tapas",
                "sampler.temperature=null",
            ],
            "temperature_final moves",
        ),
        (["model.learn_temperature=true", "model.temperature_final=0.05"], "choose one"),
        *(
            ([f"loss.name={loss}", "sampler.name=tapas", "sampler.correction=none"], "log q")
            for loss in ("nce", "blackout", "bernoulli")
        ),
        (
            [
                "model.learn_temperature=true",
                "sampler.name=tapas",
                "sampler.temperature=null",
            ],
            "starting temperature",
        ),
    ],
)
def test_settings_that_cannot_train_together_are_refused(
    splits: Splits, sets: list[str], message: str
) -> None:
    cfg = load_config(overrides=[*TINY, *sets])
    with pytest.raises(RecsysInputError, match=message):
        build_module(cfg, splits.num_items, item_counts(splits))


@pytest.mark.parametrize(
    "sets",
    [
        ["loss.name=bernoulli", "sampler.name=bernoulli"],
        ["loss.name=bernoulli", "sampler.name=tapas"],
        ["model.learn_temperature=true", "sampler.name=exact", "sampler.nu=10"],
        ["model.learn_temperature=true", "sampler.name=tapas", "sampler.temperature=1.0"],
        ["model.learn_temperature=true", *UNIT, "sampler.name=rff"],
        ["model.temperature_final=0.05", *UNIT, "sampler.name=rff"],
    ],
)
def test_the_combinations_beside_the_refused_ones_still_build(
    splits: Splits, sets: list[str]
) -> None:
    cfg = load_config(overrides=[*TINY, *sets])
    module = build_module(cfg, splits.num_items, item_counts(splits))
    assert isinstance(module.sampler, SAMPLERS[cfg.sampler.name])


class RecordingSampler:
    """Delegates to a real sampler and records what the module tells it."""

    def __init__(self, inner, num_items: int) -> None:
        self.inner = inner
        self.num_items = num_items
        self.updates: list[torch.Tensor] = []
        self.refreshes = 0
        self.progress: list[float] = []
        self.per_query = inner.per_query
        self.last_batch: tuple[torch.Tensor, torch.Tensor] | None = None

    def sample(self, queries, positives, num):
        neg = self.inner.sample(queries, positives, num)
        self.last_batch = (positives, neg.ids)
        return neg

    def update(self, item_idx, item_emb) -> None:
        assert item_emb.shape == (len(item_idx), 32)
        self.updates.append(item_idx)
        positives, ids = self.last_batch
        assert set(positives.tolist()) | set(ids.reshape(-1).tolist()) <= set(item_idx.tolist())
        self.inner.update(item_idx, item_emb)

    def refresh(self, item_emb) -> None:
        assert item_emb.shape[0] == self.num_items + 1 and torch.all(item_emb[0] == 0)
        self.refreshes += 1
        self.inner.refresh(item_emb)

    def set_progress(self, fraction: float) -> None:
        self.progress.append(fraction)

    def proposal_log_probs(self, queries):
        return self.inner.proposal_log_probs(queries)


@pytest.mark.parametrize(
    ("sets", "sparse"),
    [
        (["sampler.name=exact", "sampler.refresh_every=3"], False),
        (["sampler.name=exact", "sampler.refresh_every=3"], True),
        (["sampler.name=uniform"], False),  # stateless: nothing to rebuild
        (["sampler.name=midx", "sampler.refresh_every=3", "sampler.codewords=4"], True),
    ],
)
def test_sampler_updates_and_refreshes(splits: Splits, sets: list[str], sparse: bool) -> None:
    cfg = load_config(overrides=[*TINY, *sets, f"train.sparse_embeddings={sparse}"])
    model = build_model(cfg.model, splits.num_items, sparse=sparse)
    ctx = SamplerContext(splits.num_items, item_counts(splits), cfg.model.temperature)
    spy = RecordingSampler(build_sampler(cfg.sampler, ctx), splits.num_items)
    module = RetrievalModule(model, cfg, spy, sampled_loss=get_loss("sampled_softmax"))
    before = model.item_embedding_weight.detach().clone()
    _fit(cfg, splits, module, epochs=1, limit_train_batches=7, limit_val_batches=0)
    assert module.clock.steps == 7
    assert spy.progress == pytest.approx([step / 7 for step in range(7)])  # before each step
    refits = isinstance(cfg.sampler, TracksTheTable) and (cfg.sampler.refits_sparse or not sparse)
    if not refits:  # refresh only at the start
        assert spy.refreshes == 1 and len(spy.updates) == 7
    else:  # start + steps 3 and 6
        assert spy.refreshes == 3 and len(spy.updates) == 5
    assert not torch.equal(before, model.item_embedding_weight.detach())


def test_full_softmax_and_per_query_paths_train(splits: Splits) -> None:
    per_query = ["sampler.name=uniform", "sampler.per_query=true", "sampler.num_negatives=8"]
    for extra in (["sampler.name=full"], per_query):
        cfg = load_config(overrides=[*TINY, *extra])
        module = build_module(cfg, splits.num_items, item_counts(splits))
        batch = next(iter(SequenceDataModule(splits, 20, 16).train_dataloader()))
        loss, touched = module._step(batch)
        assert loss.ndim == 0 and torch.isfinite(loss)
        loss.backward()
        assert module.model.item_embedding_weight.grad is not None
        assert (touched is None) == (extra[0] == "sampler.name=full")


def test_validation_logs_full_ranking_metrics(splits: Splits, tmp_path: Path) -> None:
    cfg = load_config(overrides=[*TINY, "sampler.name=popularity"])
    module = build_module(cfg, splits.num_items, item_counts(splits))
    pl.seed_everything(0, verbose=False)
    dm = SequenceDataModule(splits, 20, 64)
    trainer = pl.Trainer(
        max_epochs=1, limit_train_batches=2, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
        num_sanity_val_steps=0, default_root_dir=tmp_path,
    )  # fmt: skip
    trainer.fit(module, datamodule=dm)
    logged = trainer.callback_metrics
    for key in ("val/ndcg@10", "val/recall@10", "val/mrr@10", "val/recall@100", "val/full_ce"):
        assert key in logged
    assert 0.0 <= float(logged["val/recall@10"]) <= float(logged["val/recall@100"]) <= 1.0
    assert "val/proposal_kl" in logged and float(logged["val/proposal_kl"]) > 0.0


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_registered_sampler_trains_and_validates(splits: Splits, name: str) -> None:
    extra = ["loss.name=absolute_softmax"] if name == "quadratic" else []
    extra += UNIT if SETTINGS[name].unit_kernel else []
    if issubclass(SETTINGS[name], TracksTheTable):
        extra.append("sampler.refresh_every=2")
    cfg = load_config(
        overrides=[*TINY, f"sampler.name={name}", "sampler.num_negatives=16", *extra]
    )  # fmt: skip
    module = build_module(cfg, splits.num_items, item_counts(splits))
    before = module.model.item_embedding_weight.detach().clone()
    _fit(cfg, splits, module, epochs=1, limit_train_batches=3, limit_val_batches=1)
    assert module.clock.steps == 3
    assert not torch.equal(before, module.model.item_embedding_weight.detach())


def test_length_sorted_evaluation_gives_the_split_order_figures(splits: Splits) -> None:
    cfg = load_config(overrides=TINY)
    module = build_module(cfg, splits.num_items, item_counts(splits))
    _fit(cfg, splits, module, 1, limit_train_batches=5, limit_val_batches=0)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size, eval_batch_size=64)
    users = len(dm.test_set)
    in_order = [dm.test_set[list(range(i, min(i + 64, users)))] for i in range(0, users, 64)]
    tower, emb = module.model.query_tower, module.model.item_tower.all_embeddings().detach()
    sorted_ranks, sorted_lp = rank_loader(
        tower, emb, dm.test_dataloader(), cfg.model.temperature, cfg, absolute=False
    )
    ranks, lp = rank_loader(tower, emb, in_order, cfg.model.temperature, cfg, absolute=False)
    assert torch.equal(sorted_ranks, ranks) and torch.allclose(sorted_lp, lp, atol=1e-5)
    assert dm.test_dataloader().dataset is dm.test_set and len(ranks) == users


def test_last_position_targets_train_through_fit(splits: Splits, tmp_path: Path) -> None:
    from training.loop.trainer import fit

    cfg = load_config(overrides=[*TINY, "train.targets=last", "train.max_epochs=1"])
    fitted = fit(cfg, splits, tmp_path / "run", limit_train_batches=3, enable_progress_bar=False)
    lengths = splits.train["items"].list.len().to_numpy()
    transitions = int((lengths - 1).clip(min=0).sum())
    assert fitted.data.train_set.last_only and len(fitted.data.train_set) == transitions
    assert fitted.module.clock.steps == 3


@pytest.mark.parametrize("tower", ["bsarec", "sasrec"])
def test_queries_at_the_kept_positions_whichever_kind_of_batch(splits: Splits, tower: str) -> None:
    cfg = load_config(overrides=[*TINY, f"model.tower={tower}"])
    module = build_module(cfg, splits.num_items, item_counts(splits)).eval()
    for targets in ("last", "all"):  # batches of either kind, whatever the config says
        data = SequenceDataModule(splits, cfg.model.max_len, 64, targets=targets)
        inputs, targets_ = next(iter(data.train_dataloader()))
        keep = targets_ != 0
        assert keep[:, :-1].any() == (targets == "all")  # "last": the encode branch is taken
        with torch.no_grad():
            every_position = module.model.query_tower(inputs)[keep]
            assert torch.allclose(module._queries(inputs, keep), every_position, atol=1e-5)


@pytest.mark.parametrize(("final", "restored"), [("0.05", 0.07), ("null", 0.2)])
def test_a_checkpoint_gives_back_a_scheduled_temperature_only(
    splits: Splits, final: str, restored: float
) -> None:
    cfg = load_config(
        overrides=[*TINY, "model.temperature=0.2", f"model.temperature_final={final}",
                   "sampler.name=uniform"]  # the default, midx, keeps its temperature
    )  # fmt: skip
    module = build_module(cfg, splits.num_items, item_counts(splits))
    module.restore_temperature({"temperature": 0.07})  # a fixed one stays the config's
    assert module.current_temperature() == pytest.approx(restored)
    module.restore_temperature({})  # a checkpoint from before the key: left as it is
    assert module.current_temperature() == pytest.approx(restored)
