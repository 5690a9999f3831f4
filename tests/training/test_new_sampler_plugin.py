"""A sampler added in this file only: its module (the classes below) and its registration (one
call) are all it takes to train it from the CLI, configure it and see it in the manifest."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
import torch
from pydantic import Field
from torch import Tensor
from typer.testing import CliRunner

from data.errors import RecsysInputError
from model.bundle import read_manifest
from tests.training.tiny import EVERY_POSITION, flags
from training.sampler_settings import SETTINGS, SampledSettings
from training.samplers import SAMPLERS, Negatives, SamplerContext, register_sampler
from training.samplers.base import Stateless

NAME = "every-kth"
DRAWS: list[int] = []  # the number of negatives of each draw the plugin made
TINY = [
    "--set", "model.dim=16", "--set", "model.max_len=10", "--set", "model.num_layers=1",
    "--set", "train.batch_size=256", "--set", "train.refit_epochs=0", "--set", "eval.ks=[10]",
    *flags(EVERY_POSITION),  # a target at every position: a few steps an epoch
]  # fmt: skip


class EveryKthSettings(SampledSettings):
    """`sampler: {name: every-kth, k: 2}`: uniform over the items whose idx is a multiple of k."""

    name: Literal["every-kth"] = "every-kth"
    k: int = Field(2, ge=1)


class EveryKthSampler(Stateless):
    """Shared draws, uniform over items k, 2k, ...; log_q = log(m / their count)."""

    per_query = False

    def __init__(self, cfg: EveryKthSettings, ctx: SamplerContext) -> None:
        self.k, self.num_items = cfg.k, ctx.num_items
        self.ids = torch.arange(cfg.k, ctx.num_items + 1, cfg.k)

    def sample(self, queries: Tensor, positives: Tensor, num: int) -> Negatives:
        DRAWS.append(num)
        pick = torch.randint(0, len(self.ids), (num,))
        log_q = math.log(num / len(self.ids))
        pos_log_q = torch.full(positives.shape, log_q, device=positives.device)
        return Negatives(
            ids=self.ids[pick].to(queries.device),
            log_q=torch.full((num,), log_q, device=queries.device),
            pos_log_q=pos_log_q.masked_fill(positives % self.k != 0, -math.inf),
        )

    def proposal_log_probs(self, queries: Tensor) -> Tensor:
        row = torch.full((self.num_items + 1,), -math.inf)
        row[self.ids] = -math.log(len(self.ids))
        return row.to(queries.device).expand(queries.shape[0], -1).clone()


@pytest.fixture
def plugin() -> Iterator[None]:
    """The plugin registered (one call), then removed: other tests see the built-in ones."""
    register_sampler(EveryKthSettings)(EveryKthSampler)
    DRAWS.clear()
    yield
    del SAMPLERS[NAME], SETTINGS[NAME]


def test_a_sampler_defined_here_trains_from_the_cli(plugin: None, tmp_path: Path) -> None:
    from app.cli import app

    args = ["train", "--home", str(tmp_path), "--dataset", "synthetic", "--max-epochs", "1"]
    sampled = [*args, "--sampler", NAME, "--num-negatives", "32", "--set", "sampler.k=3"]
    result = CliRunner().invoke(app, [*sampled, *TINY, "--json"])
    assert result.exit_code == 0, result.output[-3000:]
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert (payload["sampler"], payload["num_negatives"]) == (NAME, 32)
    assert DRAWS and set(DRAWS) == {32}
    config = read_manifest(tmp_path / "models" / payload["version"]).config
    assert config["sampler"] == {"name": NAME, "num_negatives": 32, "k": 3}
    wrong = CliRunner().invoke(app, [*args, "--sampler", NAME, "--set", "sampler.ratio=2"])
    assert isinstance(wrong.exception, RecsysInputError)  # `main` makes it exit 2
    assert (
        "sampler.ratio: not a key of the every-kth sampler; its keys: name, num_negatives, k"
        in str(wrong.exception)
    )
