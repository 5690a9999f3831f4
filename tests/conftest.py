"""Shared test fixtures: an isolated workspace per test and paths to the shared datasets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from data.workspace import Workspace

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A fresh, empty workspace; RECSYS_HOME points at it so CLI calls use it too."""
    home = tmp_path / "home"
    monkeypatch.setenv("RECSYS_HOME", str(home))
    return Workspace(home)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's tests (`pytest.mark.usefixtures("one_thread")`).

    On a shared 2-core machine two contending OpenMP threads run about 10x slower than one.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def shared_dataset(name: str) -> Path:
    """Path of `../shared/datasets/<name>/interactions.csv`; skips the test if absent."""
    path = SHARED_DATASETS / name / "interactions.csv"
    if not path.exists():
        pytest.skip(f"shared dataset {name} not available at {path}")
    return path
