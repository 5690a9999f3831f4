"""Reading records and writing markdown tables of their figures, as every result block does.

A run is named by its record's path under `benchmarks/results/` without `.json`
(`recipe_final/amazon-beauty/full`); each table row links the records it comes from, relative
to the page it is written into.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from benchmarks import records
from benchmarks.paths import REPO, RESULTS


@functools.cache
def record(run: str) -> dict[str, Any]:
    """The record of `run` (its path under `results/`, no `.json`)."""
    return records.read(RESULTS / f"{run}.json")


def recorded(run: str) -> bool:
    """`run` (its path under `results/`, no `.json`) has a record."""
    return (RESULTS / f"{run}.json").is_file()


def metrics(run: str) -> dict[str, Any]:
    """The metrics of `run`'s record."""
    return dict(record(run)["metrics"])


def cite(run: str, page: str) -> str:
    """A link to `run`'s record from `page` (its path under the repository)."""
    target = os.path.relpath(RESULTS / f"{run}.json", (REPO / page).parent)
    return f"[`{run}`]({Path(target).as_posix()})"


def table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table, ending in a newline."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def num(value: float | None, digits: int = 4) -> str:
    """`value` with `digits` decimals; `-` where it was not measured."""
    return "-" if value is None else f"{value:.{digits}f}"


def gap(value: float) -> str:
    """A relative difference as a signed percentage."""
    return f"{100 * value:+.1f}%"


def interval(triple: list[float] | tuple[float, ...] | None) -> str:
    """`(gap, low, high)` as `+1.5% (-0.5 to +3.4)`; `reference` where there is none."""
    if triple is None:
        return "reference"
    point, low, high = triple
    return f"{gap(point)} ({gap(low)} to {gap(high)})"


def load(machine: dict[str, Any]) -> str:
    """The 1-minute load average before and after a run, as recorded."""
    before, after = machine.get("load_before"), machine.get("load_after")
    if before is None or after is None:
        return "not recorded"
    return f"{before:.1f} → {after:.1f}"


def machine(run: str) -> str:
    """What `run` ran on: cores, torch threads, precision, device and its load."""
    facts = record(run)["machine"]
    parts = [f"{facts['cores']} cores" if facts["cores"] else None]
    if facts["torch_threads"]:
        parts.append(f"{facts['torch_threads']} thread" + "s" * (facts["torch_threads"] > 1))
    parts += [facts["precision"], facts["device"] and facts["device"].upper()]
    return ", ".join(p for p in parts if p) + f", load {load(facts)}"


def sampler_name(facts: dict[str, Any]) -> str:
    """A sweep run's sampler as a reader names it: `` `rff`, m = 64 ``, or `full softmax`."""
    if facts["sampler"] == "full":
        return "full softmax"
    m = facts["num_negatives"]
    name = f"`{facts['label']}`" + (f", m = {m}" if m else "")
    return name + ("" if facts["loss"] == "sampled_softmax" else f", `{facts['loss']}` loss")
