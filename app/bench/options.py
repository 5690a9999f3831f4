"""What the `recsys bench` commands share: comma-separated option values, result writing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data.errors import RecsysInputError

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks/results"


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


def json_result(payload: dict[str, Any], json_path: Path | None) -> str:
    """The payload as indented JSON text, also written to `json_path` when one is given."""
    text = json.dumps(payload, indent=2)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(text + "\n")
    return text


def write_results(
    payload: dict[str, Any],
    json_path: Path,
    plot_path: Path,
    plot: Callable[[dict[str, Any], Path], None],
) -> None:
    """Write the payload as JSON and its plot as PNG, then say where both went."""
    import typer

    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(payload, indent=1) + "\n")
    plot(payload, plot_path)
    typer.echo(f"wrote {json_path} and {plot_path}")


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as PNG (creating its folder) and release it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
