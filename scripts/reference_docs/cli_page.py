"""docs/reference/cli.md from the `recsys` typer app: every command, its usage and its options.

Read from the click command tree typer builds, so what a command accepts and what this page
says cannot differ. `recsys bench` hands its arguments to the benchmarks' own app, whose
commands are listed under it.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import typer
from typer._click import Command, Context, Parameter

from scripts.reference_docs import ROOT
from scripts.reference_docs.markdown import anchor, bound, code, paragraphs, table

# A command that passes its arguments on to another app: (command path, "module:attribute").
DELEGATES = {("recsys", "bench"): "benchmarks.cli:bench_app"}
SCALARS = {int: "integer", float: "number", str: "text", bool: "boolean", Path: "path"}


def render(command_line: str) -> str:
    """The whole page; `command_line` is the command that writes it."""
    from app.cli import app

    root = typer.main.get_command(app)
    commands = list(_walk(root, Context(root, info_name="recsys")))
    contents = [f"- [`{c.command_path}`](#{anchor(c.command_path)})" for c in commands]
    sections = [_section(ctx) for ctx in commands]
    head = (
        "# Command-line reference\n\n"
        f"Every `recsys` command and its options, generated from the CLI by `{command_line}`; "
        "do not edit it by hand.\n\n"
        "Every command also takes `--help`, which prints the same facts in the terminal.\n\n"
    )
    return head + "\n".join(contents) + "\n\n" + "\n\n".join(sections) + "\n"


def _walk(command: Command, ctx: Context) -> Iterator[Context]:
    """`ctx` and the contexts of every command under it, depth first, in declaration order."""
    yield ctx
    names = tuple(ctx.command_path.split())
    if names in DELEGATES:
        module, attribute = DELEGATES[names].split(":")
        delegate = typer.main.get_command(getattr(importlib.import_module(module), attribute))
        yield from _children(delegate, ctx)
    else:
        yield from _children(command, ctx)


def _children(group: Command, ctx: Context) -> Iterator[Context]:
    """The contexts of the subcommands of `group` (none for a plain command)."""
    for name, sub in getattr(group, "commands", {}).items():
        if not sub.hidden:
            yield from _walk(sub, Context(sub, info_name=name, parent=ctx))


def _section(ctx: Context) -> str:
    """One command's heading, help, usage and tables of arguments and options."""
    command = ctx.command
    params: list[Any] = [
        p for p in command.params if p.name != "help" and not getattr(p, "hidden", False)
    ]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    parts = [f"## {ctx.command_path}", paragraphs(command.help), _usage(ctx, arguments, options)]
    if arguments:
        rows = [(p.name.upper(), _type(p), _required(p), p.help or "") for p in arguments]
        parts.append(table(("Argument", "Type", "Required", "Description"), rows))
    if options:
        rows = [(_names(p), _type(p), _default(p), _description(p)) for p in options]
        parts.append(table(("Option", "Type", "Default", "Description"), rows))
    return "\n\n".join(part for part in parts if part)


def _usage(ctx: Context, arguments: list[Any], options: list[Any]) -> str:
    """The command line's shape, as `--help` prints it but with plain argument names."""
    pieces = [ctx.command_path] + (["[OPTIONS]"] if options else [])
    for argument in arguments:
        name = argument.name.upper() + ("..." if argument.nargs == -1 else "")
        pieces.append(name if argument.required else f"[{name}]")
    if getattr(ctx.command, "commands", None) or tuple(ctx.command_path.split()) in DELEGATES:
        pieces.append("COMMAND [ARGS]...")
    return "```text\n" + " ".join(pieces) + "\n```"


def _names(param: Any) -> str:
    """The option's spellings, each in a code span."""
    return ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])


def _type(param: Any) -> str:
    """What the option takes: flag, choices, a number with its range, a path, text."""
    if getattr(param, "is_flag", False):
        return "flag"
    desc = param.type_descriptor
    if desc.choices is not None:
        label = ", ".join(code(choice) for choice in desc.choices)
    else:
        annotation = get_args(desc.annotation)[0] if desc.is_list else desc.annotation
        label = SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))
        if limits := bound(param.min, param.max):
            label = f"{label} {limits}"
    return f"{label}; repeatable" if param.multiple or param.nargs == -1 else label


def _default(param: Any) -> str:
    """The value the command uses without the option ('' when there is none to show)."""
    value = param.default
    if getattr(param, "is_flag", False):
        return "on" if value else "off"
    if isinstance(param.show_default, str):  # said in words, as `--help` says it
        return param.show_default
    if value is None or value == () or value == [] or param.show_default is False:
        return ""
    return code(_portable(value) if isinstance(value, Path) else value)


def _portable(path: Path) -> str:
    """A default path as on any machine: the checkout's relative, the temp folder's $TMPDIR."""
    if path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    temp = Path(tempfile.gettempdir())
    return f"$TMPDIR/{path.relative_to(temp)}" if path.is_relative_to(temp) else str(path)


def _required(param: Parameter) -> str:
    """An argument's Required cell."""
    return "yes" if param.required else "no"


def _description(param: Any) -> str:
    """The option's help, then where else it can come from and whether it must be given."""
    text = paragraphs(param.help)
    if param.envvar:
        text += f" Environment: `{param.envvar}`."
    if param.required:
        text += " Required."
    return text.strip()
