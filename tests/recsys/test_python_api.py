"""The Python API: `recsys.train` on the synthetic demo log, `recsys.load`, `recommend`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import recsys
from data.errors import RecsysInputError
from tests.training.tiny import EVERY_POSITION

TINY = [
    "model.dim=16",
    "model.max_len=10",
    "model.num_layers=1",
    "train.refit_epochs=0",
    *EVERY_POSITION,
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, one_thread: None) -> tuple[Path, Any]:
    """A home with one published model, v1, of one epoch on the demo log; and the result."""
    home = tmp_path_factory.mktemp("python-api") / "home"
    result = recsys.train(events="synthetic", home=home, overrides=TINY, max_epochs=1, version="v1")
    return home, result


def _log(home: Path) -> pl.DataFrame:
    (demo,) = (home / "synthetic").glob("events-*.csv")
    return pl.read_csv(demo)


def _checked(items: list[recsys.ScoredItem], k: int, known: set[str]) -> list[str]:
    """The ids of `items`, once checked: k distinct known items, best first."""
    ids, scores = [item.item_id for item in items], [item.score for item in items]
    assert len(set(ids)) == len(ids) == k
    assert scores == sorted(scores, reverse=True)
    assert set(ids) <= known
    return ids


def test_train_publishes_and_returns_the_bundle(trained: tuple[Path, Any]) -> None:
    home, result = trained
    assert result.version == "v1" and result.epochs == 1
    assert Path(result.bundle) == home / "models" / "v1"
    assert (home / "models" / "CURRENT").read_text().strip() == "v1"
    assert {"recall@10", "ndcg@10"} <= set(result.metrics["test"])


def test_a_homes_model_knows_its_users_and_leaves_out_their_items(
    trained: tuple[Path, Any],
) -> None:
    home, _ = trained
    log = _log(home)
    model = recsys.load(home)
    assert model.version == "v1"
    answer = model.recommend(user="u1", k=5)
    assert (answer.strategy, answer.model_version, answer.warnings) == ("model", "v1", [])
    ids = _checked(answer.items, 5, set(log["item_id"]))
    assert not set(ids) & set(log.filter(pl.col("user_id") == "u1")["item_id"])
    again = model.recommend(user="u1", k=5, exclude_seen=False)
    assert len(again.items) == 5


def test_a_bundle_recommends_for_a_history_and_knows_no_user(trained: tuple[Path, Any]) -> None:
    home, result = trained
    known = set(_log(home)["item_id"])
    model = recsys.load(result.bundle)
    answer = model.recommend(["i3", "i4"], k=3)
    assert answer.strategy == "model"
    assert not {"i3", "i4"} & set(_checked(answer.items, 3, known))
    stranger = model.recommend(user="u1", k=2)  # a bundle alone has no event store
    assert stranger.strategy == "popular" and "unknown user_id 'u1'" in stranger.warnings[0]
    assert "i3" not in _checked(model.similar("i3", 4), 4, known)


def test_bad_input_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(RecsysInputError, match="model.nope"):
        recsys.train(events="synthetic", home=tmp_path / "a", overrides=["model.nope=1"])
    with pytest.raises(RecsysInputError, match="no model is published"):
        recsys.load(tmp_path / "empty")
