"""The named grids of `bench quality --grid NAME`, and what sets some of them apart.

Each grid's default result folder, which skip the test split, and which have a report of their
own (not the sampler comparison's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmarks.paths import RESULTS
from benchmarks.sweeps.final_grid import defaults, defaults_report, final, final_report
from benchmarks.sweeps.recipe_grid import recipe
from benchmarks.sweeps.recipe_report import recipe_report
from benchmarks.sweeps.sweep import SWEEP_DIR
from benchmarks.sweeps.sweep_grid import Planner, RunSpec, catalogue, comparison, midx_today
from benchmarks.sweeps.tower_grid import towers

GRIDS: dict[str, Planner] = {
    "comparison": comparison, "catalogue": catalogue, "recipe": recipe, "final": final,
    "towers": towers, "midx": midx_today, "defaults": defaults,
}  # fmt: skip
RESULT_DIRS = {
    "comparison": SWEEP_DIR,
    "catalogue": RESULTS / "catalogue_1m",
    "recipe": RESULTS / "recipe_study",
    "final": RESULTS / "recipe_final",
    "towers": RESULTS / "tower_study",
    "midx": SWEEP_DIR,
    "defaults": RESULTS / "defaults",
}
VALIDATION_ONLY = frozenset({"recipe", "towers"})  # a study chosen on val: its runs never rank test
# grid -> its markdown report from (result folder, bootstrap resamples)
REPORTS: dict[str, Callable[[Path, int, Path | None], str]] = {
    "recipe": recipe_report,
    "final": final_report,
    "defaults": defaults_report,
}


def shared_plan(grid: str, out: Path) -> tuple[list[RunSpec], int]:
    """The runs and planned count of `grid` and every grid writing to the same folder."""
    home = RESULT_DIRS.get(grid)
    sharing = [g for g, folder in RESULT_DIRS.items() if folder == home] if home else [grid]
    plans = [GRIDS[g](out) for g in sharing]
    return [spec for specs, _ in plans for spec in specs], sum(count for _, count in plans)


def result_dir(grid: str, out: Path | None) -> Path:
    """`out`, or the grid's own folder (an unknown grid's name is refused later: SWEEP_DIR)."""
    return out if out is not None else RESULT_DIRS.get(grid, SWEEP_DIR)
