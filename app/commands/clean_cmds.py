"""`recsys clean`: list, and with --yes remove, what killed trainings and exports left behind."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli_common import HomeOption, JsonOption, emit_json, workspace


def clean(
    home: HomeOption = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Remove what is listed; without it, clean only lists.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List temp bundles, CURRENT temp files and unfinished training runs of dead processes.

    Nothing a live process is writing is ever listed, nor the run a killed retrain will resume;
    with --yes the listed paths are removed. While a training, retrain, tune or benchmark sweep
    holds the home, clean is refused (exit 2, the holder named).
    """
    from data.lock import training_lock
    from training.workflows.leftovers import find_leftovers, remove_leftovers

    ws = workspace(home)
    if not ws.root.is_dir():
        leftovers = []
    else:  # a training holding the lock is live: its run is not a leftover (exit 2 naming it)
        with training_lock(ws, "clean"):
            leftovers = find_leftovers(ws)
            if yes:
                remove_leftovers(ws, leftovers)
    if as_json:
        rows = [{"path": str(x.path), "reason": x.reason, "bytes": x.size_bytes} for x in leftovers]
        emit_json({"leftovers": rows, "removed": yes})
        return
    if not leftovers:
        typer.echo(f"nothing to clean in {ws.root}")
    for item in leftovers:
        typer.echo(f"{item.path}  ({item.size_bytes / 1e6:.1f} MB): {item.reason}")
    if leftovers:
        total = sum(x.size_bytes for x in leftovers) / 1e6
        done = "removed" if yes else "would remove (run again with --yes)"
        typer.echo(f"{done}: {len(leftovers)} path(s), {total:.1f} MB")


def register(app: typer.Typer) -> None:
    """Attach `recsys clean`."""
    app.command("clean")(clean)
