"""The named grids of `recsys bench quality --grid NAME`, and what sets some of them apart.

Each grid's default result folder, which skip the test split, and which have a report of their
own (not the sampler comparison's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.bench import options
from app.bench.final_grid import final, final_report
from app.bench.recipe_grid import recipe
from app.bench.recipe_report import recipe_report
from app.bench.sweep_grid import Planner, catalogue, comparison

GRIDS: dict[str, Planner] = {
    "comparison": comparison, "catalogue": catalogue, "recipe": recipe, "final": final,
}  # fmt: skip
RESULT_DIRS = {
    "comparison": "sampler_sweep", "catalogue": "catalogue_1m", "recipe": "recipe_study",
    "final": "recipe_final",
}  # fmt: skip
VALIDATION_ONLY = frozenset({"recipe"})  # a study chosen on val: its runs never rank test
# grid -> its markdown report from (result folder, bootstrap resamples)
REPORTS: dict[str, Callable[[Path, int], str]] = {"recipe": recipe_report, "final": final_report}


def result_dir(grid: str | None, out: Path | None) -> Path:
    """`out`, or the grid's own folder under benchmarks/results (the comparison's without one)."""
    if out is not None:
        return out
    return options.RESULTS / RESULT_DIRS.get(grid or "comparison", RESULT_DIRS["comparison"])
