"""`recsys tune`: a thin wrapper over `training.workflows.tune`; prints the trials table or JSON."""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli_common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    SamplerOption,
    SetOption,
    emit_json,
    workspace,
)
from data.errors import RecsysInputError
from training.config_loading import build_run_config


def _seed_in_range(seed: int) -> int:
    """`--seed`: Optuna's sampler takes 0 to 2**32 - 1 (BadParameter otherwise: exit 2)."""
    if not 0 <= seed < 2**32:
        raise typer.BadParameter(f"{seed} is not in 0 to 4294967295")
    return seed


def tune_command(
    budget_minutes: Annotated[
        float,
        typer.Option(
            "--budget-minutes",
            help="Wall minutes for the whole search; each trial gets budget / trials at most.",
        ),
    ],
    home: HomeOption = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            metavar="<path|name>",
            help="Log file or folder, or a dataset name, to ingest first (as train).",
            show_default="the home's events; none is an error",
        ),
    ] = None,
    trials: Annotated[int, typer.Option(help="Trials in all, counting earlier sittings.")] = 8,
    sampler: SamplerOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="<dir>",
            help="Folder of the study, trials.json and best.yaml.",
            show_default="<home>/tune",
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(
            metavar="<int>",
            callback=_seed_in_range,
            help="Seed of the search's sampler, 0 to 4294967295.",
        ),
    ] = 0,
    json_out: JsonOption = False,
) -> None:
    """Search model and training settings on the validation split; write the best config.

    A key given with --set keeps its value in every trial instead of being searched.
    Resumable: the same command continues the study in --out. Then train with the result:
    `recsys train --config <out>/best.yaml`.
    """
    from training.workflows.tune import TuneRequest, tune

    if not (math.isfinite(budget_minutes) and budget_minutes > 0) or trials < 1:
        raise RecsysInputError("--budget-minutes must be a number > 0 and --trials >= 1")
    base = build_run_config(config or [], set_ or [], sampler=sampler)
    ws = workspace(home)
    fixed = frozenset(text.split("=", 1)[0].strip() for text in set_ or [])
    request = TuneRequest(base, out or ws.tune_dir, budget_minutes, trials, seed, fixed)
    _require_folder(request.out)  # before the lock and the study
    with contextlib.redirect_stdout(sys.stderr):  # stdout holds the table or the JSON only
        summary = tune(ws, request, dataset)
    if json_out:
        emit_json(summary)
        return
    typer.echo(trials_table(summary))


def _require_folder(out: Path) -> None:
    """Refuse an --out that is, or lies under, something other than a folder (RecsysInputError)."""
    there = next(path for path in (out, *out.parents) if path.exists())
    if not there.is_dir():
        raise RecsysInputError(f"--out {out}: {there} is not a folder")


def trials_table(summary: dict[str, Any]) -> str:
    """One line per trial (number, state, val NDCG@10, minutes, settings), then the best."""
    lines = [f"{'trial':>5}  {'state':<8}  {'val ndcg@10':>11}  {'min':>5}  settings"]
    for t in summary["trials"]:
        score = "-" if t["val_ndcg@10"] is None else f"{t['val_ndcg@10']:.4f}"
        minutes = "-" if t["minutes"] is None else f"{t['minutes']:.1f}"
        settings = " ".join(f"{k}={_short(v)}" for k, v in t["params"].items())
        lines.append(f"{t['number']:>5}  {t['state']:<8}  {score:>11}  {minutes:>5}  {settings}")
    best = summary["best"]
    if best is None:
        lines.append("no trial completed: nothing to recommend yet (run the command again)")
    else:
        lines.append(
            f"best: trial {best['number']}, val ndcg@10 {best['val_ndcg@10']:.4f}; "
            f"recsys train --config {summary['best_config']}"
        )
    return "\n".join(lines)


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def register(app: typer.Typer) -> None:
    """Attach `tune`."""
    app.command("tune")(tune_command)
