"""Each speed option of `train` keeps a fixed-seed run's quality (issue 16's tests).

One tiny synthetic training with every option at its default, then one per option turned the
other way; the final val and test NDCG@10 (every user ranked, whatever the option) must stay
within `TOLERANCE` of the default run's. bf16 has its own test (`test_precision.py`).
"""

import math
from pathlib import Path

import pytest

from data.synth import generate_events
from data.workspace import Workspace
from training.config_loading import load_config
from training.workflows.pipeline import train

TOLERANCE = 0.2  # stated: within 20% of the default run's NDCG@10, as bf16's test
ITEMS = 120
BASE = [
    "model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64",
    "sampler.name=midx",  # a sampled run: sparse_embeddings is one of its options
    "sampler.num_negatives=32", "train.max_epochs=6", "train.patience=6",
    "train.refit_epochs=0", "eval.ks=[10]",
]  # fmt: skip
# option -> the setting that is not the default (each one's default: configs/default.yaml)
OPTIONS = {
    "bucket_by_length": "train.bucket_by_length=false",
    "num_workers": "train.num_workers=1",
    "val_users": "train.val_users=100",
    "val_every": "train.val_every=2",
    "sparse_embeddings": "train.sparse_embeddings=true",
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "speed.csv"
    generate_events(200, ITEMS, 3000, seed=2).write_csv(path)
    return path


def _ndcg(home: Path, log_file: Path, *sets: str) -> dict[str, float]:
    result = train(
        Workspace(home), load_config(overrides=[*BASE, *sets]), dataset=str(log_file),
        enable_progress_bar=False,
    )  # fmt: skip
    return {split: result.metrics[split]["ndcg@10"] for split in ("val", "test")}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory, log_file: Path) -> dict[str, float]:
    return _ndcg(tmp_path_factory.mktemp("default") / "home", log_file)


def test_the_default_run_learns(default_run: dict[str, float]) -> None:
    chance = sum(1 / math.log2(rank + 1) for rank in range(1, 11)) / ITEMS
    assert min(default_run.values()) > 2 * chance


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_speed_option_keeps_the_default_runs_quality(
    tmp_path: Path, log_file: Path, default_run: dict[str, float], option: str
) -> None:
    scores = _ndcg(tmp_path / "home", log_file, OPTIONS[option])
    for split, score in scores.items():
        assert abs(score - default_run[split]) <= TOLERANCE * default_run[split], (split, score)
