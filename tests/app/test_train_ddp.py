"""`recsys train --devices 2 --strategy ddp`: two real CPU processes (gloo), started by Lightning.

Stated tolerance: with dropout off and the full softmax the two-process run computes the same
steps as one process (each rank's part of a batch, the loss weighed so DDP's average is the
whole batch's mean), so losses and metrics agree to float rounding: 1e-5 relative.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch

from data.split import build_splits
from data.synth import generate_events
from data.workspace import Workspace
from model.bundle import ModelBundle
from tests.serving.server import running_server
from tests.training.tiny import EVERY_POSITION, flags
from training.evaluation.metrics import popularity_baseline
from training.loop.datamodule import SequenceDataModule, item_counts

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--set", "model.dim=16", "--set", "model.max_len=10", "--set", "model.num_layers=1",
    "--set", "model.dropout=0", "--set", "train.batch_size=64", "--set", "train.accelerator=cpu",
    "--set", "train.threads=1", "--max-epochs", "3",
    # fp32: under bf16 each process rounds its own products, so the equalities below are fp32's
    "--set", "train.precision=fp32",
    "--set", "train.refit_epochs=0",
    *flags(EVERY_POSITION),  # a target at every position: a few steps an epoch
]  # fmt: skip
REL = 1e-5


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ddp") / "log.csv"
    generate_events(300, 120, 5000, seed=5).write_csv(path)
    return path


def train(home: Path, log: Path, *extra: str) -> tuple[dict, str]:
    """`recsys train --json` in a subprocess: (its result, its stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "app", "train", "--home", str(home), "--dataset", str(log)]
    done = subprocess.run(
        [*cmd, "--json", *TINY, *extra], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def train_losses(result: dict) -> list[float]:
    with open(Path(result["run_dir"]) / "metrics.csv") as handle:
        return [float(row["train/loss"]) for row in csv.DictReader(handle) if row["train/loss"]]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-9)


def test_two_processes_train_and_refit_what_one_process_does(
    tmp_path: Path, log_file: Path
) -> None:
    """Val is the best round's, test and the bundle the refit's (two epochs on every rank)."""
    refit = ("--sampler", "full", "--set", "train.refit_epochs=2")
    one, _ = train(tmp_path / "one", log_file, *refit)
    two, stderr = train(tmp_path / "two", log_file, *refit, "--devices", "2")

    assert "memory per rank (2 ranks): item table" in stderr
    assert stderr.count("epoch 3/3") == 1  # one progress line an epoch, from rank 0
    assert set(one) == set(two) and one["epochs"] == two["epochs"] == 3
    assert one["refit_epochs"] == two["refit_epochs"] == 2
    for split in ("val", "test"):
        for name, value in one["metrics"][split].items():
            assert close(value, two["metrics"][split][name]), (split, name)
    losses_one, losses_two = train_losses(one), train_losses(two)
    assert len(losses_one) == len(losses_two) > 0
    assert all(close(a, b) for a, b in zip(losses_one, losses_two, strict=True))
    assert len(list((tmp_path / "two" / "models").glob("2*"))) == 1  # rank 0 alone writes


def test_ranks_reading_their_own_users_train_and_measure_every_user(
    tmp_path: Path, log_file: Path
) -> None:
    """data.shard_by_rank: each rank its own users' windows; final metrics over every user."""
    home = tmp_path / "home"
    sampled = ["--sampler", "popularity", "--num-negatives", "8"]
    sharded = ["--devices", "2", "--set", "data.shard_by_rank=true"]
    result, stderr = train(home, log_file, *sampled, *sharded)
    for rank in (0, 1):  # each rank read its own users (the secondary logs it too)
        assert f"rank {rank} of 2 holds users {rank}::2:" in stderr
    assert "differs across ranks" not in stderr  # popularity from the whole log on both ranks
    evaluate = [sys.executable, "-m", "app", "evaluate", "--home", str(home), "--json"]
    done = subprocess.run(evaluate, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    recomputed = json.loads(done.stdout)  # one process, every user, from the bundle
    splits = build_splits(Workspace(home))
    assert recomputed["examples"] == splits.test.height > 0
    for name, value in recomputed["metrics"].items():
        assert close(value, result["metrics"]["test"][name]), name
    bundle = ModelBundle.load(home / "models" / result["version"])
    expected = item_counts(splits).to(torch.int64).tolist()  # one process's whole-log counts
    assert bundle.popularity.tolist() == expected


@pytest.mark.slow  # over 10 s: `make test-all` runs it; `make test` keeps CI within 8 minutes
def test_a_two_process_rff_bundle_serves(tmp_path: Path, log_file: Path) -> None:
    """The kernel trees are compared across ranks every validation round (a drift fails the run)."""
    home, log = tmp_path / "home", tmp_path / "log.csv"
    generate_events(300, 1000, 5000, seed=6).write_csv(log)  # the ranks' steps touch other rows
    sampled = ["--sampler", "rff", "--num-negatives", "4", "--set", "sampler.per_query=false"]
    result, stderr = train(home, log, *sampled, "--devices", "2", "--strategy", "ddp")
    assert "differs across ranks" not in stderr
    assert result["metrics"]["val"]["ndcg@10"] > 0
    with running_server(home) as url:
        body = httpx.get(f"{url}/recommend", params={"user_id": "u1", "k": 5}, timeout=10).json()
    assert body["model_version"] == result["version"] and len(body["items"]) == 5


@pytest.mark.slow  # over 10 s: `make test-all` runs it; `make test` keeps CI within 8 minutes
def test_the_default_sampler_trains_on_two_ranks_and_beats_popularity(
    tmp_path: Path, log_file: Path
) -> None:
    """`auto`, the sampler when none is named, in a data-parallel training: each rank picks."""
    two = ("--devices", "2", "--strategy", "ddp", "--max-epochs", "10")  # 3 trail popularity
    above = ("--set", "sampler.full_up_to=100")  # a catalogue of about 120 items: midx
    result, stderr = train(tmp_path / "home", log_file, *two, *above)
    assert result["sampler"] == "midx" and result["epochs"] == 10
    assert "memory per rank (2 ranks)" in stderr
    splits = build_splits(Workspace(tmp_path / "home"))
    test = SequenceDataModule(splits, 10, 64).test_set
    batch = test[list(range(len(test)))]
    base = popularity_baseline(item_counts(splits), batch["target"], batch["seen"], ks=(10,))
    assert result["metrics"]["test"]["recall@10"] > base["recall@10"] + 0.05


def test_torchrun_starts_the_ranks_of_a_sparse_table_training(
    tmp_path: Path, log_file: Path
) -> None:
    """torchrun starts both processes itself; the home has its events before they start."""
    home = tmp_path / "home"
    ingest = [sys.executable, "-m", "app", "ingest", str(log_file), "--home", str(home)]
    subprocess.run(ingest, cwd=REPO, check=True, capture_output=True, timeout=120)
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "app"]
    sampled = [
        "--sampler",
        "uniform",
        "--num-negatives",
        "8",
        "--set",
        "train.sparse_embeddings=true",
    ]
    done = subprocess.run(
        [*launch, "train", "--home", str(home), "--json", *TINY, *sampled, "--devices", "2"],
        cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = done.stdout.splitlines()  # rank 0 alone reports
    result = json.loads(line)
    assert (home / "models" / "CURRENT").read_text().strip() == result["version"]
    assert result["metrics"]["test"]["ndcg@10"] > 0
