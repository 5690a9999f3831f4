"""Pieces every `recsys` command shares: common options, JSON output, output files, logging."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from app.log_format import SafeFormatter
from data.errors import RecsysInputError
from data.workspace import HOME_ENV_VAR, Workspace

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        envvar=HOME_ENV_VAR,
        help="Workspace directory (events, vocab, runs, models). Default: ./workspace.",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout instead of text.")
]
ConfigOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--config", help="YAML config file (repeatable), keys as in configs/default.yaml."
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override section.key=value (repeatable); every key, with its default and "
        "meaning, is in configs/default.yaml.",
    ),
]


def workspace(home: Path | None) -> Workspace:
    """The workspace chosen by `--home`, `$RECSYS_HOME` or the default."""
    return Workspace.resolve(home)


def require_writable(outputs: dict[str, Path | None]) -> None:
    """Refuse, before any work, output files that could not be written.

    `outputs`: each option's file (None: not asked for). A file's folder is created if missing
    (as the write would), then a probe file is made and removed there: permission bits do not
    tell, for root or on a read-only filesystem.

    Raises:
        RecsysInputError: a file is a folder, or its folder cannot be created or written.

    """
    for option, path in outputs.items():
        if path is None:
            continue
        if path.exists() and not path.is_file() and not path.is_dir():  # /dev/null, a pipe
            if not os.access(path, os.W_OK):
                raise RecsysInputError(f"{option} {path}: cannot be written")
            continue
        if path.is_dir():
            raise RecsysInputError(f"{option} {path}: is a folder; {option} names a file")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path.parent):
                pass
        except FileExistsError:
            raise RecsysInputError(f"{option} {path}: {path.parent} is a file") from None
        except OSError as err:
            reason = err.strerror or type(err).__name__
            message = f"{option} {path}: cannot write in {path.parent} ({reason})"
            raise RecsysInputError(message) from None


def emit_json(payload: dict[str, Any]) -> None:
    """Write one JSON object on stdout (the only thing a `--json` command prints there).

    A non-finite float (a NaN cross-entropy) is written as null: JSON has no NaN.
    """
    sys.stdout.write(json.dumps(_finite(payload), default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    """`value` with every non-finite float, at any depth of dicts and lists, made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def setup_logging(verbose: bool) -> None:
    """Log to stderr: INFO by default, DEBUG with --verbose; control characters escaped.

    Lightning's start-up chatter (accelerator lines, adverts, a deprecation warning from its
    own internals) is kept to warnings unless --verbose is given.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not verbose:  # a handler filter: Lightning resets its loggers' levels on import
        handler.addFilter(_quiet_lightning)
        for noise in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=noise)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, handlers=[handler], force=True
    )


# Warnings Lightning and torch print on every run that say nothing about the user's run.
QUIET_WARNINGS = (
    r".*LeafSpec.*",  # torch's pytree deprecation, raised inside Lightning
    r".*smaller than the logging interval.*",  # a small dataset's epoch: nothing to do
    # Data-parallel validation: the module gathers every rank's ranks before computing the
    # metrics (training/lit_module.py), so each rank logs the same values; syncing adds nothing.
    r".*sync_dist=True.*",
)


def _quiet_lightning(record: logging.LogRecord) -> bool:
    """Drop Lightning's INFO chatter (accelerator lines, adverts such as its litlogger tip)."""
    noisy = record.name.startswith(("pytorch_lightning", "lightning"))
    return not noisy or record.levelno >= logging.WARNING
