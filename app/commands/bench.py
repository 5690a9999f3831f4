"""`recsys bench ...`: the repository's benchmarks (`python -m benchmarks`), from a checkout.

The benchmark package is not part of the installed product: it is imported only when the
command runs, and a product installed without the checkout says so.
"""

from __future__ import annotations

import typer

from data.errors import RecsysInputError


def bench(ctx: typer.Context) -> None:
    """Run the repository's benchmarks, from a checkout (`recsys bench --help` lists them).

    The same command line as `python -m benchmarks`.
    """
    try:
        from benchmarks.cli import bench_app
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] != "benchmarks":
            raise
        raise RecsysInputError(
            "recsys bench: the benchmarks are not installed with recsys; run it from the "
            "repository checkout (python -m benchmarks)"
        ) from None
    command = typer.main.get_command(bench_app)
    with command.make_context("recsys bench", list(ctx.args)) as sub:
        command.invoke(sub)


def register(app: typer.Typer) -> None:
    """Attach `recsys bench`, which hands its arguments to the benchmarks' own command line."""
    app.command(
        "bench",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(bench)
