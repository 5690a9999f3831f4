"""Import a script of benchmarks/ (not a package) as a module; a tiny trained home for its tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_benchmark(name: str) -> ModuleType:
    """The module of `benchmarks/<name>.py`."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_trained_home(tmp_path: Path) -> Path:
    """A home with one finished run: uniform m = 8, a tiny model, on a tiny synthetic log."""
    from app.bench.quality import run_quality
    from data.synth import generate_events

    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=4).write_csv(log)
    sets = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64"]
    home = tmp_path / "home"
    run_quality(str(log), ["uniform"], [8], tmp_path / "q.json", None, home, 1, sets,
                enable_progress_bar=False)  # fmt: skip
    return home
