"""Pieces every `recsys` command shares: options, how --help shows them, JSON, files, logs."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from typer._click import Context
from typer.core import TyperArgument, TyperOption

from app.log_format import SafeFormatter
from data.errors import RecsysInputError
from data.workspace import HOME_ENV_VAR, Workspace


class RegistryChoice:
    """`parser=` of an option whose choices are a registry's names, read when it is used.

    A plugin registered before the command runs is a choice too, and `--help` lists it; the
    registry is read only then, so a registry that imports torch costs nothing to start.
    """

    def __init__(self, what: str, names: Callable[[], Iterable[str]]) -> None:
        self.what = what
        self.names = names

    def __call__(self, text: str) -> str:
        """`text` if it is a registered name.

        Raises:
            typer.BadParameter: another name (a usage error, exit 2, listing the known ones).

        """
        known = list(self.names())
        if text not in known:
            raise typer.BadParameter(f"unknown {self.what} {text!r}; known: {', '.join(known)}")
        return text

    def label(self) -> str:
        """The choices as `--help` shows them: `<a|b|c>`."""
        return f"<{'|'.join(self.names())}>"


def _value_label(param: TyperOption | TyperArgument, ctx: Context) -> str | None:
    """What `--help` shows a parameter takes: nothing for a flag, else its choices or metavar.

    Typer's rich help prints every option's type, a flag's too (`--json <bool>`, as if it took
    a value; its plain help leaves flags bare), a repeated option's Python type (`<list[Path]>`)
    and a bounded number's `<int range>` (the bounds follow anyway, `[x>=1]`): this replaces
    that method of both parameter classes, in one place, for `recsys` and the benchmarks.
    """
    if isinstance(param, TyperOption) and (param.is_flag or param.count):
        return None
    descriptor = param.type_descriptor
    if isinstance(descriptor.parameter_info.parser, RegistryChoice):
        return descriptor.parameter_info.parser.label()
    if isinstance(param, TyperOption) and param.metavar is not None:
        return param.metavar  # an argument's metavar is its name, in the column before
    if descriptor.is_list:  # several values: the type of one, then `...`
        (element,) = get_args(descriptor.annotation)
        return f"<{_plain(param._bare_type(element))}>..."
    if descriptor.is_ranged:
        return f"<{descriptor.ranged_type_name}>"
    label = param.display_type(ctx)
    return "<text>" if label == "<str>" else label


def _plain(type_name: str) -> str:
    """A type's name as help says it: `text` for Python's `str`, others in lower case."""
    return "text" if type_name == "str" else type_name.lower()


TyperOption.display_type_rich = _value_label  # type: ignore[method-assign,assignment]
TyperArgument.display_type_rich = _value_label  # type: ignore[method-assign,assignment]


def _sampler_names() -> list[str]:
    """Every registered sampler's name (`full` included), built-in or a plugin's."""
    from training.config import register_samplers
    from training.sampler_settings import SETTINGS

    register_samplers()
    return sorted(SETTINGS)


HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        envvar=HOME_ENV_VAR,
        metavar="<dir>",
        help="Workspace directory (events, vocab, runs, models).",
        show_default="./workspace",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout instead of text.")
]
ConfigOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        metavar="<file>",
        help="YAML config file (repeatable), keys as in configs/default.yaml.",
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="<key=value>",
        help="Override section.key=value (repeatable); every key, with its default and "
        "meaning, is in configs/default.yaml.",
    ),
]


def _minutes(text: str) -> float:
    """`--max-minutes`: a number of minutes above 0 (BadParameter otherwise: exit 2)."""
    try:
        minutes = float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None
    if not minutes > 0:
        raise typer.BadParameter("must be > 0")
    return minutes


MaxMinutesOption = Annotated[
    float | None,
    typer.Option(
        "--max-minutes",
        parser=_minutes,
        metavar="<float>",
        help="Wall-clock cap on training, in minutes (the best round is kept).",
        show_default="train.max_minutes",
    ),
]
SamplerOption = Annotated[
    str | None,
    typer.Option(
        "--sampler",
        parser=RegistryChoice("sampler", _sampler_names),
        help="Negative sampler; auto: the full softmax up to sampler.full_up_to items, midx "
        "above; full: the full softmax, which draws none.",
        show_default="sampler.name",
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
    # metrics (training/loop/lit_module.py), so each rank logs the same values; syncing adds
    # nothing.
    r".*sync_dist=True.*",
)


def _quiet_lightning(record: logging.LogRecord) -> bool:
    """Drop Lightning's INFO chatter (accelerator lines, adverts such as its litlogger tip)."""
    noisy = record.name.startswith(("pytorch_lightning", "lightning"))
    return not noisy or record.levelno >= logging.WARNING
