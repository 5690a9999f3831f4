"""`bench quickstart`: how long the quick start's training takes, as `make up` runs it.

`scripts/train.sh` on a fresh home (what `make up` and compose's trainer run first): the
synthetic demo log generated, ingested, and the default model trained to early stopping or the
demo's time cap, then refitted and published. One subprocess, timed as a whole; its `--json`
result (epochs, refit epochs, test metrics) and the wall seconds are the record. The image
build of the Docker quick start is not part of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.paths import REPO, RESULTS

RECORD = RESULTS / "quickstart/train.json"


def run_train_script(home: Path) -> dict[str, Any]:
    """`scripts/train.sh --json` on the fresh `home`; its result."""
    env = {**os.environ, "RECSYS_HOME": str(home), "PATH": _with_venv_bin()}
    env.pop("RECSYS_DATASET", None)  # a fresh home: the synthetic demo log
    script = REPO / "scripts" / "train.sh"
    done = subprocess.run(
        ["bash", str(script), "--json"], cwd=REPO, env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"scripts/train.sh failed ({done.returncode}): {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout))


def _with_venv_bin() -> str:
    """PATH with this interpreter's folder first, where `recsys` is installed beside it."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def quickstart(
    json_path: Annotated[
        Path, typer.Option("--out", help="Where to write the result record.")
    ] = RECORD,
) -> None:
    """Time the quick start's training (scripts/train.sh on a fresh home), as a record."""
    require_writable({"--out": json_path})
    started = records.start()
    with tempfile.TemporaryDirectory(prefix="recsys-quickstart-") as folder:
        result = run_train_script(Path(folder) / "workspace")
    keep = ("dataset", "sampler", "epochs", "refit_epochs", "train_seconds", "seconds_per_epoch")
    metrics = {**{key: result[key] for key in keep}, "test": result["metrics"]["test"]}
    records.save(
        json_path, {"script": "scripts/train.sh", "home": "fresh"}, metrics, started,
        precision=result["precision"], device=result["device"], threads=result["threads"],
    )  # fmt: skip
    sys.stdout.write(f"{json.dumps(metrics)}\nwrote {json_path}\n")
