"""What the benchmark commands share: comma-separated option values, output files, figures."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data.errors import RecsysInputError
from data.store import atomic_write


def names(text: str, option: str) -> list[str]:
    """`"a, b,,c"` -> `["a", "b", "c"]`; an empty list is an input error naming `--option`."""
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values:
        raise RecsysInputError(f"--{option} needs at least one value")
    return values


def ints(text: str, option: str, minimum: int = 1) -> list[int]:
    """`"10000,100000"` -> `[10000, 100000]`; any value not an integer >= `minimum` is refused."""
    values = names(text, option)
    try:
        parsed = [int(v) for v in values]
    except ValueError:
        raise RecsysInputError(
            f"--{option}: expected comma-separated integers, got {text!r}"
        ) from None
    if any(v < minimum for v in parsed):
        raise RecsysInputError(f"--{option}: values must be at least {minimum}, got {text!r}")
    return parsed


def write_output(path: Path, write: Callable[[Path], Any]) -> None:
    """`write(file)` into `path`, atomically where `path` is (to be) a regular file.

    A device, a pipe or a symlink's target (`--out /dev/null`) is written straight, since a
    rename would replace it.
    """
    if path.is_symlink() or (path.exists() and not path.is_file()):
        write(path)
    else:
        atomic_write(path, write)


def plot_record(
    body: dict[str, Any], path: Path, plot_path: Path, plot: Callable[[dict[str, Any], Path], None]
) -> None:
    """Plot a record written to `path` into `plot_path` (PNG, atomically), then say where."""
    import typer

    plot(body, plot_path)
    typer.echo(f"wrote {path} and {plot_path}")


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as PNG, atomically (creating its folder), and release it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    write_output(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def doc_link(target: Path, doc: Path) -> str:
    """`target` as a link in the markdown file `doc` reaches it (relative, POSIX)."""
    return Path(os.path.relpath(target.resolve(), doc.resolve().parent)).as_posix()


def search_seconds(index: Any, queries: Any, k: int) -> Any:
    """float64 `[Q]` wall seconds of `index.search` for each query alone (`queries [Q, d]`)."""
    import time

    import numpy as np

    took = np.empty(len(queries))
    for i, query in enumerate(queries):
        start = time.perf_counter()
        index.search(query[None], k)
        took[i] = time.perf_counter() - start
    return took
