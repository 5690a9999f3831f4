"""`recsys retrain`: ingest new logs, warm-start a candidate, publish it behind a quality gate."""

from __future__ import annotations

import contextlib
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from app.cli_common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    MaxMinutesOption,
    SetOption,
    emit_json,
    workspace,
)
from app.commands.data_cmds import FormatOption, ItemColOption, TimeColOption, UserColOption
from data.errors import RecsysInputError
from data.ingest import LogLayout
from training.config_loading import build_run_config


def parse_since(text: str | None) -> int | None:
    """`--since`: Unix seconds, or an ISO-8601 date/time (UTC unless it names a zone)."""
    if text is None:
        return None
    if re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):
        return int(text)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise RecsysInputError(
            f"--since {text!r}: expected Unix seconds or an ISO-8601 time (2026-11-01T00:00)"
        ) from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


def retrain_command(
    logs: Annotated[
        list[Path],
        typer.Option(
            "--logs",
            metavar="<path>",
            help="New log file or folder (repeat --logs for several); ingested once, by "
            "content: a file ingested before is not read again.",
        ),
    ],
    home: HomeOption = None,
    fmt: FormatOption = None,
    user_col: UserColOption = "user_id",
    item_col: ItemColOption = "item_id",
    time_col: TimeColOption = "timestamp",
    max_epochs: Annotated[
        int | None,
        typer.Option(
            help="Upper bound on the fit's epochs; 0: the warm start itself is the candidate.",
            show_default="retrain.max_epochs for a warm fit; train.max_epochs with --full or "
            "when that is null",
        ),
    ] = None,
    max_minutes: MaxMinutesOption = None,
    full: Annotated[
        bool, typer.Option("--full", help="Train from scratch instead of warm-starting.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Publish even if the gate finds it worse.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="<time>",
            help="Train only on events at or after this time (Unix seconds or ISO-8601).",
        ),
    ] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
    json_out: JsonOption = False,
) -> None:
    """Retrain on new logs: warm start from the served model, publish unless it is worse.

    The served model's config is the base; --config and --set apply on top. When no stored
    event is new to the served model, nothing is trained (--full or --force trains anyway);
    on a home with no served model it trains from scratch (the defaults under --config and
    --set) and publishes, as `recsys train` would. The gate scores the fit's kept round; the
    model published is that round refit on the val events too (retrain.refit_epochs epochs
    after a warm start, train.refit_epochs with --full; 0: the round itself). The gate pairs
    both models' NDCG@10 on each validation row and refuses the candidate only when it is worse
    by more than retrain.tolerance at retrain.confidence; the output gives the mean difference
    and its interval.
    Exit 0 when the candidate was published or kept out by the gate, or nothing was new (the
    output says which), 1 on failure, 2 on bad input or a home another training holds. Run the
    same command again after a crash: it resumes, and ingests nothing twice.
    """
    from training.workflows.retrain import RetrainRequest, retrain, served_config

    ws = workspace(home)
    if max_epochs is not None and max_epochs < 0:
        raise RecsysInputError("--max-epochs must be >= 0")
    cfg = build_run_config(
        config or [],
        set_ or [],
        max_epochs=max_epochs or None,  # 0: no fit at all, handled by the retrain
        base=served_config(ws.models_dir),
        options={"train": {} if max_minutes is None else {"max_minutes": max_minutes}},
    )
    layout = LogLayout(fmt, user_col, item_col, time_col)
    request = RetrainRequest(list(logs), full, force, parse_since(since), max_epochs, layout)
    with contextlib.redirect_stdout(sys.stderr):  # stdout holds the result only
        result = retrain(ws, cfg, request)
    if json_out:
        emit_json(result.to_json())
        return
    typer.echo(_summary(result.to_json()))


def _summary(res: dict[str, object]) -> str:
    """The human result: what was added, the decision and why."""
    head = (
        f"{res['new_events']} new events ({res['rejected']} rejected), {res['new_items']} new "
        f"items, {res['new_users']} new users; "
    )
    if res["version"] == res["previous_version"]:  # nothing new: no candidate was trained
        return f"{head}{res['reason']}"
    verb = "published" if res["published"] else "not published"
    return f"{head}model {res['version']} {verb}: {res['reason']}"
