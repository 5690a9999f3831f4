"""What a sampled run's settings are likely to get wrong: warned once, by rank 0, or refused."""

from __future__ import annotations

import pytest
import torch

from data.errors import RecsysInputError
from training.config_loading import load_config
from training.loop.module_build import build_module

TINY = ["model.dim=32", "model.max_len=20", "model.dropout=0.1", "train.batch_size=64"]
N = 50  # items
COUNTS = torch.ones(N + 1)


def test_as_many_negatives_as_items_is_a_warning_that_names_the_full_softmax(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for m, warned in ((N - 1, False), (N, True)):
        caplog.clear()
        cfg = load_config(overrides=[*TINY, "sampler.name=uniform", f"sampler.num_negatives={m}"])
        with caplog.at_level("WARNING", logger="training.loop.module_build"):
            build_module(cfg, N, COUNTS)
        said = f"sampler.num_negatives={m} is not below the catalogue's {N} items" in caplog.text
        assert said == warned and ("--sampler full" in caplog.text) == warned


def test_the_ranks_a_launcher_starts_do_not_repeat_rank_zeros_warnings(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_config(overrides=[*TINY, "sampler.name=uniform", f"sampler.num_negatives={N}"])
    monkeypatch.setenv("LOCAL_RANK", "1")  # as Lightning starts its second process
    with caplog.at_level("WARNING", logger="training.loop.module_build"):
        build_module(cfg, N, COUNTS)
    assert "is not below the catalogue's" not in caplog.text


@pytest.mark.parametrize("name", ["tapas", "bernoulli", "in-batch"])
def test_per_query_with_a_sampler_that_only_shares_its_draw_is_refused(name: str) -> None:
    with pytest.raises(RecsysInputError, match=f"sampler.per_query: not a key of the {name}"):
        load_config(overrides=[*TINY, f"sampler.name={name}", "sampler.per_query=true"])
