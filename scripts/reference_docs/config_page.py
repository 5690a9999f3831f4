"""docs/reference/config.md from the pydantic config: every section and key, and the server's.

Sections are read from `RecsysConfig`, each sampler's keys from its registered settings class
(`training.sampler_settings.SETTINGS`), and the server's environment variables from
`app.api.settings.Settings`; type, default and description come from each field.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from scripts.reference_docs.markdown import anchor, bound, code, first_paragraph, table

SCALARS = {int: "integer", float: "number", str: "text", bool: "boolean", Path: "path"}
HEADER = ("Key", "Type", "Default", "Description")


def render(command_line: str) -> str:
    """The whole page; `command_line` is the command that writes it."""
    from training.config import RecsysConfig, register_samplers

    register_samplers()
    sections = list(RecsysConfig.model_fields)
    contents = [f"- [`{name}`](#{name})" for name in sections]
    contents.append(f"- [Server settings](#{anchor('Server settings')})")
    body = [_sampler_section() if name == "sampler" else _section(name) for name in sections]
    body[sections.index("model")] += "\n\n" + _towers()
    head = (
        "# Configuration reference\n\n"
        f"Every key of a run's configuration, generated from its pydantic models by "
        f"`{command_line}`; do not edit it by hand.\n\n"
        "A run starts from these defaults; then come the YAML files given with `--config FILE` "
        "(repeatable, later files winning), the `--set section.key=value` overrides, and last a "
        "command's own options (`--sampler`, `--num-negatives`, `--max-epochs`, ...). An unknown "
        "key, a wrong type or a value out of range is refused before anything runs.\n\n"
    )
    parts = [head + "\n".join(contents), *body, _server_section()]
    return "\n\n".join(parts) + "\n"


def _section(name: str) -> str:
    """One `RecsysConfig` section: its docstring and a row per key."""
    from training.config import RecsysConfig

    model = RecsysConfig.model_fields[name].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    rows = (_row(f"{name}.{key}", field) for key, field in model.model_fields.items())
    return f"## {name}\n\n{first_paragraph(model.__doc__)}\n\n{table(HEADER, rows)}"


def _sampler_section() -> str:
    """The `sampler:` section: `name` picks one settings class; a subsection for each."""
    from training.config import RecsysConfig
    from training.sampler_settings import DEFAULT_SAMPLER, SETTINGS

    names = ", ".join(code(name) for name in SETTINGS)
    intro = (
        f"{first_paragraph(RecsysConfig.model_fields['sampler'].description)}\n\n"
        f"`sampler.name` is one of {names} (default {code(DEFAULT_SAMPLER)}); the other keys "
        "are those of the sampler it names, with that sampler's defaults. `--sampler NAME` sets "
        "`sampler.name` over every other layer, and what that sampler pairs with in other "
        "sections (said under its name) under the config files and `--set`."
    )
    subsections = [_sampler(name, settings) for name, settings in SETTINGS.items()]
    return "\n\n".join(["## sampler", intro, *subsections])


def _sampler(name: str, settings: type[BaseModel]) -> str:
    """One sampler's subsection: what it is, what it pairs with, and its own keys."""
    module = sys.modules[settings.__module__]  # a sampler's own module says what it draws
    shared = module.__name__ == "training.sampler_settings"  # full and auto: their class says
    summary = first_paragraph(settings.__doc__ if shared else module.__doc__)
    pairs = [
        f"`{section}.{key}: {value}`"
        for section, keys in getattr(settings, "pairs_with", {}).items()
        for key, value in keys.items()
    ]
    parts = [f"### sampler: {name}", summary]
    if pairs:
        parts.append(f"`--sampler {name}` also sets {', '.join(pairs)}.")
    keys = [(key, field) for key, field in settings.model_fields.items() if key != "name"]
    if keys:
        parts.append(table(HEADER, (_row(f"sampler.{key}", field) for key, field in keys)))
    return "\n\n".join(parts)


def _towers() -> str:
    """`model.tower`: a subsection per registered tower, with its own keys."""
    from model.tower_settings import DEFAULT_TOWER, tower_settings

    names = ", ".join(code(name) for name in tower_settings())
    intro = (
        f"`model.tower.name` is one of {names} (default {code(DEFAULT_TOWER)}); the other keys "
        "are those of the tower it names, with that tower's defaults "
        "([query towers](../concepts/towers.md))."
    )
    parts = [intro]
    for name, settings in tower_settings().items():
        summary = first_paragraph(settings.__doc__)
        keys = [(key, field) for key, field in settings.model_fields.items() if key != "name"]
        rows = (_row(f"model.tower.{key}", field) for key, field in keys)
        parts.extend([f"### model.tower: {name}", summary])
        parts.extend([table(HEADER, rows)] if keys else [])
    return "\n\n".join(parts)


def _server_section() -> str:
    """`recsys serve`'s settings: one `RECSYS_*` environment variable per field."""
    from app.api.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    rows = (_row(f"{prefix}{key}".upper(), field) for key, field in Settings.model_fields.items())
    header = ("Variable", *HEADER[1:])
    intro = f"{first_paragraph(Settings.__doc__)} An empty variable counts as unset."
    return f"## Server settings\n\n{intro}\n\n{table(header, rows)}"


def _row(key: str, field: FieldInfo) -> tuple[str, str, str, str]:
    """A key's table row: its name, type with bounds, default and description."""
    return (f"`{key}`", _type(field.annotation, field.metadata), _default(field),
            first_paragraph(field.description))  # fmt: skip


def _default(field: FieldInfo) -> str:
    """The default as written in YAML ('' for a required key)."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.is_required():
        return ""
    else:
        value = field.default
    return code(value.model_dump() if isinstance(value, BaseModel) else value)


def _type(annotation: Any, metadata: list[Any]) -> str:
    """A field's type in words: choices, 'integer ≥ 1', 'number or null', 'list of integers'."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type(args[0], [*metadata, *_constraints(args[1:])])
    if origin is Literal:
        return ", ".join(code(arg) for arg in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type(arg, metadata) for arg in args)
    if annotation is type(None):
        return "null"
    if origin is list:
        item = _type(args[0], []) if args else "values"
        return f"list of ({item})" if " " in item else f"list of {item}"
    label = SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))
    return " ".join(filter(None, (label, _bounds(metadata))))


def _constraints(extras: tuple[Any, ...]) -> Iterator[Any]:
    """The constraints inside `Annotated[..., Field(ge=1)]` extras."""
    for extra in extras:
        yield from extra.metadata if isinstance(extra, FieldInfo) else [extra]


def _bounds(metadata: list[Any]) -> str:
    """'≥ 1', '> 0, ≤ 1' from annotated-types constraints (empty for none)."""
    low: Any = None
    high: Any = None
    exclusive = [False, False]
    for item in metadata:
        if isinstance(item, at.Ge | at.Gt):
            exclusive[0] = isinstance(item, at.Gt)
            low = item.gt if isinstance(item, at.Gt) else item.ge
        elif isinstance(item, at.Le | at.Lt):
            exclusive[1] = isinstance(item, at.Lt)
            high = item.lt if isinstance(item, at.Lt) else item.le
    return bound(low, high, (exclusive[0], exclusive[1]))
