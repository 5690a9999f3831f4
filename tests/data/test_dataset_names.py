"""A dataset given by name is looked up in `$RECSYS_DATASETS` only: no folder is assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.datasets import DATASETS_ENV_VAR, check_dataset, prepare_dataset
from data.errors import RecsysInputError
from data.synth import generate_events
from data.workspace import Workspace


def test_a_name_without_the_variable_says_to_set_it_or_give_a_path(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATASETS_ENV_VAR, raising=False)
    with pytest.raises(RecsysInputError) as err:
        check_dataset(ws, "amazon-beauty")
    message = str(err.value)
    assert "\n" not in message and DATASETS_ENV_VAR in message and "give a path" in message
    assert not ws.root.exists()


def test_a_name_is_found_in_the_variables_folder_and_refused_when_not_there(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "datasets" / "tiny").mkdir(parents=True)
    log = tmp_path / "datasets" / "tiny" / "interactions.csv"
    generate_events(30, 20, 300, seed=0).write_csv(log)
    monkeypatch.setenv(DATASETS_ENV_VAR, str(tmp_path / "datasets"))
    assert prepare_dataset(ws, "tiny") == "tiny"
    with pytest.raises(RecsysInputError, match=f"nor a dataset name in {tmp_path / 'datasets'}"):
        check_dataset(ws, "other")
