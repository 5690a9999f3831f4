"""The one result-record schema: every benchmark run is `results/<study>/<run>.json`, wrapped so.

```
{"schema": 1, "study": str, "run": str,
 "commit": {"sha": str | null, "dirty": bool | null},   # the code that ran (git HEAD)
 "config": object | null,   # the resolved config, or the benchmark's parameters
 "machine": {"cpu", "cores", "load_before", "load_after", "precision", "device",
             "torch_threads"},                           # each null where unknown
 "wall_seconds": float | null,
 "metrics": object}         # what the benchmark measured, in its own shape
```
`start()` when a run begins (load average, clock), `save(path, ...)` when it ends; `read` returns
a record and refuses any other JSON. Records converted from before this schema hold the old
file's payload in `metrics` (its recognisable config part in `config`), and `commit` is the
commit that added the file.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.options import write_output
from benchmarks.paths import REPO, RESULTS
from data.errors import RecsysInputError

SCHEMA = 1
# key -> the types its value may have
TYPES: dict[str, tuple[type, ...]] = {
    "schema": (int,), "study": (str,), "run": (str,), "commit": (dict,),
    "config": (dict, type(None)), "machine": (dict,), "wall_seconds": (int, float, type(None)),
    "metrics": (dict,),
}  # fmt: skip
MACHINE = ("cpu", "cores", "load_before", "load_after", "precision", "device", "torch_threads")


@functools.cache
def commit() -> dict[str, Any]:
    """The checkout's git HEAD, and whether its code differs from it (results aside).

    Asked once a process: the code that runs is the one it started with. Unknown (nulls)
    outside a git checkout.
    """

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(done.stderr)
        return done.stdout

    try:
        sha = git("rev-parse", "HEAD").strip()
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                      ":!benchmarks/results")  # fmt: skip
    except OSError:
        return {"sha": None, "dirty": None}
    return {"sha": sha, "dirty": bool(changed.strip())}


@dataclass(frozen=True)
class Started:
    """When a run began: its clock, the machine's 1-minute load average then, and its code.

    `code` is `commit()` as the run begins, so a commit made while it runs is not named.
    """

    clock: float
    load: float
    code: dict[str, Any] = field(default_factory=commit)


def start() -> Started:
    """Mark a run's beginning (for its wall seconds, its load before and its code)."""
    return Started(time.perf_counter(), load_1m())


def load_1m() -> float:
    """The machine's 1-minute load average now."""
    return round(os.getloadavg()[0], 2)


@functools.cache
def cpu_model() -> str | None:
    """The CPU's model name (`/proc/cpuinfo`, else what the platform says; None if nothing)."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def machine(
    started: Started,
    precision: str | None = None,
    device: str | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """The machine block of a run that began at `started` and ends now."""
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_before": started.load,
        "load_after": load_1m(), "precision": precision, "device": device,
        "torch_threads": threads,
    }  # fmt: skip


def save(
    path: Path,
    config: dict[str, Any] | None,
    metrics: dict[str, Any],
    started: Started,
    root: Path | None = None,
    earlier_seconds: float = 0.0,
    **machine_facts: Any,
) -> dict[str, Any]:
    """Write the record of a run that began at `started` and ends now to `path`; the record.

    The study and run are named by `location(path, root)`. `earlier_seconds`: the wall
    seconds of the sittings before this one, when a run resumes. `machine_facts`:
    `precision`, `device` and `threads` (torch's), where the run knows them. Written
    atomically; a device such as /dev/null is written in place.
    """
    study, run = location(path, root)
    body = {
        "schema": SCHEMA, "study": study, "run": run, "commit": started.code,
        "config": config, "machine": machine(started, **machine_facts),
        "wall_seconds": round(earlier_seconds + time.perf_counter() - started.clock, 3),
        "metrics": metrics,
    }  # fmt: skip
    text = json.dumps(body, indent=1) + "\n"
    write_output(path, lambda tmp: tmp.write_text(text))
    return body


def location(path: Path, root: Path | None = None) -> tuple[str, str]:
    """The study and run of the record at `path`: `root`'s name, and `path` under it.

    The run drops `.json`. Default root: the study folder under `results/` that holds `path`,
    else the file's folder.
    """
    if root is None:
        inside = path.resolve().is_relative_to(RESULTS.resolve())
        parts = path.resolve().relative_to(RESULTS.resolve()).parts if inside else ()
        root = RESULTS / parts[0] if len(parts) > 1 else path.parent
    return root.name, path.resolve().relative_to(root.resolve()).with_suffix("").as_posix()


def problems(doc: Any) -> list[str]:
    """What keeps `doc` from being a record of this schema (empty: it is one)."""
    if not isinstance(doc, dict):
        return [f"a {type(doc).__name__}, not an object"]
    found = [f"{key}: missing" for key in TYPES if key not in doc]
    found += [
        f"{key}: a {type(doc[key]).__name__}"
        for key, types in TYPES.items()
        if key in doc and (not isinstance(doc[key], types) or isinstance(doc[key], bool))
    ]
    if doc.get("schema") != SCHEMA:
        found.append(f"schema: {doc.get('schema')!r}, not {SCHEMA}")
    if isinstance(doc.get("machine"), dict) and sorted(doc["machine"]) != sorted(MACHINE):
        found.append(f"machine: keys {sorted(doc['machine'])}, not {sorted(MACHINE)}")
    if isinstance(doc.get("commit"), dict) and sorted(doc["commit"]) != ["dirty", "sha"]:
        found.append(f"commit: keys {sorted(doc['commit'])}, not ['dirty', 'sha']")
    return found


def read(path: Path) -> dict[str, Any]:
    """The record at `path`.

    Raises:
        OSError: the file cannot be read (FileNotFoundError: there is none).
        RecsysInputError: the file is not JSON, or not a record of this schema.

    """
    try:
        doc = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecsysInputError(f"{path}: not a result record ({err})") from None
    if found := problems(doc):
        raise RecsysInputError(f"{path}: not a result record ({'; '.join(found)})")
    return dict(doc)
