"""A retrain seen from a running server: new items become recommendable, no request fails."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import polars as pl
import pytest
import torch

from data.workspace import Workspace
from tests.app.test_api_reload import wait_for
from tests.serving.server import running_server
from tests.training.retraining import write_logs
from tests.training.tiny import EVERY_POSITION
from training.config_loading import load_config
from training.workflows.pipeline import train
from training.workflows.retrain import RetrainRequest, retrain, served_config

TINY = [
    "model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64",
    "train.max_epochs=2", "eval.ks=[10,20]",
    *EVERY_POSITION,  # a target at every position: a few steps an epoch
]  # fmt: skip


class Traffic:
    """One client thread asking for a known user's recommendations until stopped."""

    def __init__(self, url: str, user: str) -> None:
        self.url, self.user = url, user
        self.stop = threading.Event()
        self.answers, self.failures = 0, []  # type: ignore[var-annotated]
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self.stop.is_set():
                try:
                    resp = client.get("/recommend", params={"user_id": self.user, "k": 10})
                    self.answers += 1
                    if resp.status_code != 200:
                        self.failures.append(f"{resp.status_code}: {resp.text}")
                except httpx.HTTPError as err:
                    self.failures.append(repr(err))


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """The retrain tests' old and new logs, and the items only the new one holds."""
    old, new = write_logs(tmp_path)
    late = set(pl.read_csv(new)["item_id"]) - set(pl.read_csv(old)["item_id"])
    return old, new, sorted(late)


def test_retrain_publishes_new_items_to_a_running_server_without_a_failed_request(
    tmp_path: Path, logs: tuple[Path, Path, list[str]]
) -> None:
    old, new, late = logs
    torch.set_num_threads(1)
    ws = Workspace(tmp_path / "home")
    train(ws, load_config(overrides=TINY), dataset=str(old), version="v1")
    user = pl.read_csv(old)["user_id"][0]
    with running_server(ws.root) as url, httpx.Client(base_url=url) as api:
        assert api.get(f"/items/{late[0]}").status_code == 404  # unknown to v1
        traffic = Traffic(url, user)
        traffic.thread.start()
        cfg = load_config(overrides=["retrain.tolerance=1.0"], base=served_config(ws.models_dir))
        result = retrain(ws, cfg, RetrainRequest([new]))
        wait_for(lambda: api.get("/ready").json()["model_version"] == result.version)
        traffic.stop.set()
        traffic.thread.join()
        assert traffic.failures == [] and traffic.answers > 0
        for item in late:
            assert api.get(f"/items/{item}").status_code == 200
        similar = api.get(f"/similar/{late[0]}", params={"k": 5})
        assert similar.status_code == 200 and len(similar.json()["items"]) == 5
        everything = api.post("/recommend", json={"items": [late[1]], "k": 100}).json()["items"]
        assert {row["item_id"] for row in everything} & set(late)  # new items are ranked too
