"""Each newer query tower trains through the CLI, beats popularity, and is served the same way.

A fixed-seed short run on a generated log per tower (fp32, one thread), then the published
bundle behind the real server: `/recommend` answers with the query the bundle's own tower
computes, equal to the one `recsys evaluate` ranks with.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from data.split import build_splits
from data.synth import generate_events
from data.workspace import Workspace
from model.bundle import ModelBundle
from tests.serving.server import running_server
from training.evaluation.metrics import popularity_baseline
from training.loop.datamodule import SequenceDataModule, item_counts

FIXED = [
    *("--set", "train.precision=fp32", "--set", "train.threads=1", "--set", "train.seed=3"),
    *("--set", "model.dim=32", "--set", "model.max_len=10", "--set", "train.batch_size=64"),
    *("--set", "train.refit_epochs=0", "--set", "train.lr=0.005", "--max-epochs", "4"),
]
# each tower with another sampler and loss: the towers are the samplers' and losses' equals;
# bsarec over its whole window, trained one target per prefix
SAMPLERS = {
    "fmlp": ("--sampler", "full"),
    "bsarec": (
        *("--sampler", "uniform", "--num-negatives", "32"),
        *("--set", "model.tower.window=whole", "--set", "train.targets=last"),
    ),
    "lru": ("--sampler", "tapas", "--num-negatives", "16"),
}

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log") / "events.csv"
    generate_events(400, 150, 6000, seed=4).write_csv(path)
    return path


def popularity_ndcg(home: Path) -> float:
    """Test NDCG@10 of ranking by training popularity on `home`'s splits."""
    splits = build_splits(Workspace(home))
    test = SequenceDataModule(splits, 10, 64).test_set
    batch = test[list(range(len(test)))]
    base = popularity_baseline(item_counts(splits), batch["target"], batch["seen"], ks=(10,))
    return base["ndcg@10"]


@pytest.mark.parametrize("tower", sorted(SAMPLERS))
def test_a_tower_learns_and_serves_its_own_queries(
    tower: str, log: Path, tmp_path: Path, run_cli
) -> None:
    home = tmp_path / "home"
    trained = run_cli(
        "train", "--dataset", str(log), *FIXED, "--set", f"model.tower={tower}",
        *SAMPLERS[tower], "--json",
        home=home,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    test_ndcg = json.loads(trained.stdout)["metrics"]["test"]["ndcg@10"]
    assert test_ndcg > 1.25 * popularity_ndcg(home), test_ndcg
    bundle = ModelBundle.load(Path(json.loads(trained.stdout)["bundle"]))
    assert bundle.manifest.model.tower.name == tower
    assert bundle.manifest.model.tower.sees_later_items() == (tower == "bsarec")  # whole window
    history = bundle.item_ids[1:4]
    with running_server(home, env={"OMP_NUM_THREADS": "1"}) as url:
        body = {"items": history, "k": 5}
        served = httpx.post(f"{url}/recommend", json=body, timeout=10)
    served.raise_for_status()
    got = [(item["item_id"], item["score"]) for item in served.json()["items"]]
    assert [item for item, _ in got] == [item for item, _ in expected_top(bundle, history, 5)]
    for (_, score), (_, want) in zip(got, expected_top(bundle, history, 5), strict=True):
        assert score == pytest.approx(want, abs=1e-3)


def expected_top(bundle: ModelBundle, history: list[str], k: int) -> list[tuple[str, float]]:
    """The top k of the bundle's own tower and item table (h . c), the history left out."""
    idx = torch.tensor([[bundle.id_to_idx[item] for item in history]])
    with torch.no_grad():
        query = bundle.query_tower.encode(idx)[0].numpy()
    scores = bundle.item_embeddings @ query  # the service scores h . c
    scores[[0, *idx[0].tolist()]] = -np.inf
    top = np.argsort(-scores)[:k]
    return [(bundle.item_ids[i], float(scores[i])) for i in top]
