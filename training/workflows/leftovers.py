"""What killed writers left in a workspace: temp bundles, CURRENT temp files, unfinished runs.

Nothing here is ever something a live process is writing: temp bundles follow
`bundle.stale_temps`, and a run is a leftover only when its owner record (`runs/<id>.owner.json`,
claimed when training starts and finished after publishing) names a process of this host that
is gone, and no killed retrain's journal (`retrain.json`) will resume it. Runs from before
owner records, or from another host, are left alone. `recsys clean` looks while holding the
home's training lock, so no training can start (or resume a run) meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data import owner
from data.workspace import Workspace
from model import bundle
from training.workflows import journal


@dataclass(frozen=True)
class Leftover:
    """One removable path and why it is a leftover."""

    path: Path
    reason: str
    size_bytes: int


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def find_leftovers(ws: Workspace) -> list[Leftover]:
    """Every leftover of the workspace, temp bundles first, then unfinished runs."""
    found = list(bundle.stale_temps(ws.models_dir))
    resumable = journal.pending_version(ws)
    if ws.runs_dir.is_dir():
        for run in sorted(p for p in ws.runs_dir.iterdir() if p.is_dir()):
            if run.name == resumable:  # the same retrain command run again continues it
                continue
            why = owner.abandoned_reason(ws.run_owner_path(run.name))
            if why is not None:
                found.append((run, f"unfinished training run: {why}"))
    return [Leftover(path, why, _size(path)) for path, why in found]


def remove_leftovers(ws: Workspace, leftovers: list[Leftover]) -> None:
    """Delete what `find_leftovers` named (with a run, its owner record)."""
    for item in leftovers:
        bundle.remove_path(item.path)
        if item.path.parent == ws.runs_dir:
            ws.run_owner_path(item.path.name).unlink(missing_ok=True)
