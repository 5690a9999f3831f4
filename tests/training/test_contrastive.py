"""DuoRec's supervised contrastive term: its partners, its loss, its place in a training step."""

from pathlib import Path

import numpy as np
import pytest
import torch

from data.errors import RecsysInputError
from data.ingest import ingest_files
from data.split import Splits, build_splits
from data.synth import generate_events
from data.workspace import Workspace
from training.config_loading import load_config
from training.contrastive import encode_by_length, info_nce
from training.evaluation.metrics import popularity_baseline
from training.evaluation.ranking import evaluate_loader
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.examples import SameTarget, TrainWindows, make_windows
from training.loop.module_build import build_module

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TINY = ["model.dim=32", "model.max_len=20", "train.batch_size=64", "train.targets=last"]
CONTRAST = ["loss.contrastive_weight=0.1", "sampler.name=full"]


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> Splits:
    home = tmp_path_factory.mktemp("home")
    ws = Workspace(home)
    log = home / "log.csv"
    generate_events(300, 400, 6000, seed=2).write_csv(log)
    ingest_files(ws, [log])
    return build_splits(ws)


def test_info_nce_is_each_views_softmax_over_the_other_views() -> None:
    torch.manual_seed(0)
    queries, partners = torch.randn(5, 8), torch.randn(5, 8)
    views = torch.cat([queries, partners])
    expected = []
    for i in range(10):
        others = [j for j in range(10) if j != i]
        scores = torch.stack([views[i] @ views[j] / 0.5 for j in others])
        positive = others.index((i + 5) % 10)
        expected.append(-torch.log_softmax(scores, 0)[positive])
    assert torch.allclose(info_nce(queries, partners, 0.5), torch.stack(expected).mean())


def test_info_nce_is_lower_for_partners_that_match_their_queries() -> None:
    torch.manual_seed(0)
    queries = torch.randn(32, 16)
    matched = queries + 0.1 * torch.randn(32, 16)
    assert info_nce(queries, matched, 1.0) < info_nce(queries, matched[torch.randperm(32)], 1.0)
    with pytest.raises(ValueError, match="partners"):
        info_nce(queries, matched[:31], 1.0)


@pytest.mark.parametrize("tower", ["bsarec", "sasrec", "lru"])
def test_encoding_by_length_is_encoding_the_batch(splits: Splits, tower: str) -> None:
    cfg = load_config(overrides=[*TINY, f"model.tower={tower}"])
    query_tower = build_module(cfg, splits.num_items, item_counts(splits)).model.query_tower.eval()
    windows = torch.from_numpy(
        make_windows(splits.train["items"], 20, every_prefix=True)[:100, :-1]
    )
    with torch.no_grad():
        chunked = encode_by_length(query_tower, windows, chunk=8)
        assert torch.allclose(chunked, query_tower.encode(windows), atol=1e-5)


def test_a_partner_has_the_same_target_and_is_another_window_where_one_exists() -> None:
    targets = np.array([3, 5, 3, 7, 3, 5])
    partners = SameTarget(targets)
    rows = torch.arange(6).repeat(200)
    drawn = partners.draw(rows)
    assert (targets[drawn.numpy()] == targets[rows.numpy()]).all()
    alone = rows == 3  # the one window whose target is 7
    assert (drawn[alone] == 3).all() and (drawn[~alone] != rows[~alone]).all()
    assert set(drawn[rows == 0].tolist()) == {2, 4}  # each other window of its group is drawn


def test_windows_come_with_partner_inputs_only_with_one_target_each(splits: Splits) -> None:
    windows = make_windows(splits.train["items"], 20, every_prefix=True)
    rows = list(range(64))
    inputs, targets, partner_inputs = TrainWindows(windows, last_only=True, partners=True)[rows]
    assert partner_inputs.shape[0] == inputs.shape[0] == 64
    assert (partner_inputs[:, -1] != 0).all()  # each partner ends at an item: a real window
    with pytest.raises(ValueError, match="one target per window"):
        TrainWindows(windows, partners=True)
    cfg = load_config(overrides=[*TINY, *CONTRAST])
    assert SequenceDataModule.of(splits, cfg).train_set.same_target is not None
    assert SequenceDataModule.of(splits, load_config(overrides=TINY)).train_set.same_target is None


def test_the_term_needs_one_target_per_window() -> None:
    with pytest.raises(RecsysInputError, match="contrastive_weight needs train.targets=last"):
        load_config(overrides=[*CONTRAST, "train.targets=all"])


@pytest.mark.parametrize("sampler", ["full", "uniform"])
def test_a_step_adds_the_weighted_term_to_the_recommendation_loss(
    splits: Splits, sampler: str
) -> None:
    cfg = load_config(overrides=[*TINY, *CONTRAST, "model.dropout=0", f"sampler.name={sampler}"])
    module = build_module(cfg, splits.num_items, item_counts(splits))
    inputs, targets, partner_inputs = next(
        iter(SequenceDataModule.of(splits, cfg).train_dataloader())
    )
    torch.manual_seed(0)
    alone, touched_alone = module._step((inputs, targets))
    torch.manual_seed(0)  # the same negatives
    both, touched = module._step((inputs, targets, partner_inputs))
    with torch.no_grad():
        queries = module.model.query_tower.encode(inputs)
        term = info_nce(queries, module.model.query_tower.encode(partner_inputs), 1.0)
    assert torch.allclose(both - alone, 0.1 * term, atol=1e-5)
    if sampler == "uniform":  # the partners' items have gradients too: the sampler hears them
        assert set(partner_inputs[partner_inputs != 0].tolist()) <= set(touched.tolist())
        assert set(touched_alone.tolist()) <= set(touched.tolist())


def test_a_short_run_with_the_term_learns(splits: Splits, tmp_path: Path) -> None:
    from training.loop.trainer import fit

    cfg = load_config(
        overrides=[*TINY, *CONTRAST, "model.tower=bsarec", "train.lr=0.005", "train.max_epochs=4",
                   "train.refit_epochs=0", "train.seed=0"]
    )  # fmt: skip
    fitted = fit(cfg, splits, tmp_path / "run", enable_progress_bar=False)
    assert fitted.data.train_set.same_target is not None
    model = fitted.module.model
    data = fitted.data
    got = evaluate_loader(
        model.query_tower, model.item_tower.all_embeddings().detach(), data.test_dataloader(),
        cfg.model.temperature, cfg, absolute=False,
    )  # fmt: skip
    batch = data.test_set[list(range(len(data.test_set)))]
    base = popularity_baseline(item_counts(splits), batch["target"], batch["seen"], ks=(10,))
    assert got["ndcg@10"] > base["ndcg@10"] + 0.05, (got, base)
