"""One-off: every result file under results/ from before the record schema, made a record.

Usage: python -m benchmarks.convert_legacy [--results DIR]

Each old JSON payload keeps every number: it becomes the record's `metrics` (a list becomes
`{"results": [...]}`), but for the part that is recognisably a config (`config`, `setting` or
`setup`, and a `bench quality` file's dataset, epoch bound and overrides), which becomes its
`config`. The machine block takes what the payload says of the machine (cores, 1-minute loads,
precision, device, torch threads; null where it says nothing), `wall_seconds` its wall seconds,
and `commit` the commit that added the file (`dirty` unknown: null). A file at the top of
results/ moves into a folder of its own with its plot; a `bench quality` file of several runs
becomes one record per run; the binary-loss runs' JSON lines become one record each. A sweep
run recorded before `train.precision`, `train.patience_window` or `train.refit_epochs` existed
gets the value it ran with (`FORMER`). Records are left as they are: running it twice is safe.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.harness.options import write_output
from benchmarks.paths import REPO, RESULTS
from benchmarks.sweeps.quality import cell_name

# what a sweep run without these keys ran with: their defaults until each changed
FORMER = {"precision": "fp32", "patience_window": 1, "refit_epochs": 0}
QUALITY_KEYS = {"dataset", "max_epochs", "overrides", "results"}
BINARY_LOSSES = ("sampler_sweep/binary_losses_synthetic.jsonl", "binary_losses")


def added_by(results: Path) -> dict[str, str]:
    """Each file's path under the repo -> the newest commit that added it."""
    log = subprocess.run(
        ["git", "-C", str(REPO), "log", "--diff-filter=A", "--name-only", "--format=%x00%H",
         "--", str(results.relative_to(REPO))],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: dict[str, str] = {}
    for block in log.split("\0")[1:]:
        sha, *paths = block.strip().splitlines()
        for path in paths:
            found.setdefault(path, sha)
    return found


def _load_1m(value: Any) -> float | None:
    """The 1-minute load of an old payload's load entry (a number, or a list of 1, 5, 15)."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int | float) else None


def _loads(payload: dict[str, Any], inner: dict[str, Any]) -> tuple[Any, Any]:
    """(before, after) loads, wherever an old payload (or its `machine`) kept them."""
    for loads in (payload.get("load_avg"), inner.get("load_avg"), payload.get("load_avg_1m")):
        if isinstance(loads, dict):
            return loads.get("before"), loads.get("after")
    after = payload.get("loadavg_after", inner.get("load_avg_1m_at_end"))
    return payload.get("loadavg_before", inner.get("load_avg_1m_at_start")), after


def machine(payload: dict[str, Any]) -> dict[str, Any]:
    """What an old payload says of its machine, in the record's machine block."""
    inner = payload["machine"] if isinstance(payload.get("machine"), dict) else {}
    before, after = _loads(payload, inner)
    threads = payload.get("threads", inner.get("threads"))
    return {
        "cpu": None, "cores": payload.get("cpus", inner.get("cpus")),
        "load_before": _load_1m(before), "load_after": _load_1m(after),
        "precision": payload.get("precision"), "device": payload.get("device"),
        "torch_threads": threads if isinstance(threads, int) else None,
    }  # fmt: skip


def split_config(payload: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(config, metrics) of an old payload: its recognisable config part, and the rest."""
    for key in ("config", "setting", "setup"):
        if isinstance(payload.get(key), dict):
            config = payload[key]
            if {"train", "model"} <= config.keys():  # a sweep run's training settings
                config = {**config, "train": {**FORMER, **config["train"]}}
            return config, {k: v for k, v in payload.items() if k != key}
    return None, payload


def wrap(path: Path, config: Any, metrics: Any, sha: str | None, payload: Any) -> None:
    """Write the record of an old payload to `path` (under results/)."""
    facts = payload if isinstance(payload, dict) else {}
    study, run = records.location(path)
    wall = facts.get("wall_seconds")
    body = {
        "schema": records.SCHEMA, "study": study, "run": run,
        "commit": {"sha": sha, "dirty": None}, "config": config, "machine": machine(facts),
        "wall_seconds": wall if isinstance(wall, int | float) else None,
        "metrics": metrics if isinstance(metrics, dict) else {"results": metrics},
    }  # fmt: skip
    assert not records.problems(body), (path, records.problems(body))
    text = json.dumps(body, indent=1) + "\n"
    write_output(path, lambda tmp: tmp.write_text(text))


def _target(path: Path, results: Path) -> Path:
    """Where an old file's record goes: a file at the top of results/ into a folder of its own."""
    return results / path.stem / path.name if path.parent == results else path


def convert_quality(path: Path, doc: dict[str, Any], sha: str | None, results: Path) -> None:
    """A `bench quality` file of runs: one record per run, its command among its config."""
    settings = {k: v for k, v in doc.items() if k not in ("results", "commands")}
    commands = doc.get("commands") or [None] * len(doc["results"])
    target, written = _target(path, results), []
    for row, command in zip(doc["results"], commands, strict=True):
        cell = cell_name(row["sampler"], row["num_negatives"])
        written.append(target if len(doc["results"]) == 1 else target.with_name(f"{cell}.json"))
        wrap(written[-1], {**settings, **({"command": command} if command else {})}, row, sha, row)
    if path not in written:
        path.unlink()


def convert_json(path: Path, sha: str | None, results: Path) -> None:
    """One old JSON file (see the module docstring)."""
    payload = json.loads(path.read_text())
    if not records.problems(payload):
        return
    if isinstance(payload, dict) and payload.keys() >= QUALITY_KEYS:
        convert_quality(path, payload, sha, results)
        return
    config, metrics = split_config(payload) if isinstance(payload, dict) else (None, payload)
    wrap(_target(path, results), config, metrics, sha, payload)
    if _target(path, results) != path:
        path.unlink()


def convert_binary_losses(results: Path, sha: str | None) -> None:
    """The binary-loss runs' JSON lines: one record each, under results/binary_losses/."""
    source = results / BINARY_LOSSES[0]
    if not source.is_file():
        return
    for line in source.read_text().splitlines():
        run = json.loads(line)
        config = {k: run[k] for k in ("loss", "m", "per_query", "temperature")}
        wrap(results / BINARY_LOSSES[1] / f"{run['name']}.json", config, run, sha, run)
    source.unlink()


def main(results: Annotated[Path, typer.Option(help="The results folder.")] = RESULTS) -> None:
    """Convert every old result file under `results` (see the module docstring)."""
    results = results.resolve()
    commits = added_by(results)

    def sha(path: Path) -> str | None:
        return commits.get(path.relative_to(REPO).as_posix())

    convert_binary_losses(results, sha(results / BINARY_LOSSES[0]))
    for path in sorted(results.rglob("*.json")):
        convert_json(path, sha(path), results)
    for png in sorted(results.glob("*.png")):  # beside their records now
        (results / png.stem).mkdir(exist_ok=True)
        shutil.move(png, results / png.stem / png.name)


if __name__ == "__main__":
    typer.run(main)
