"""`recsys bench ...`: the repository's benchmarks (`python -m benchmarks`), from a checkout.

The benchmark package is not part of the installed product: it is imported only when the
command runs, from the checkout the product is installed from (`make install`'s editable
install does not put the checkout itself on the path), and a product installed without the
checkout says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from data.errors import RecsysInputError


def bench(ctx: typer.Context) -> None:
    """Run the repository's benchmarks, from a checkout (`recsys bench --help` lists them).

    The same command line as `python -m benchmarks`.
    """
    _find_the_checkout()
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


def _find_the_checkout() -> None:
    """Append the checkout this package lies in to the path, when it holds the benchmarks."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "benchmarks" / "cli.py").is_file() and str(checkout) not in sys.path:
        sys.path.append(str(checkout))


def register(app: typer.Typer) -> None:
    """Attach `recsys bench`, which hands its arguments to the benchmarks' own command line."""
    app.command(
        "bench",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(bench)
