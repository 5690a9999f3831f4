"""The named grids of `recsys bench quality --grid NAME`, and what sets some of them apart.

Which skip the test split, and which have a report of their own (not the sampler comparison's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.bench.final_grid import final, final_report
from app.bench.recipe_grid import recipe
from app.bench.recipe_report import recipe_report
from app.bench.sweep_grid import Planner, catalogue, comparison

GRIDS: dict[str, Planner] = {
    "comparison": comparison, "catalogue": catalogue, "recipe": recipe, "final": final,
}  # fmt: skip
VALIDATION_ONLY = frozenset({"recipe"})  # a study chosen on val: its runs never rank test
# grid -> its markdown report from the result folder (the others: `sweep_report.build_report`)
REPORTS: dict[str, Callable[[Path], str]] = {"recipe": recipe_report, "final": final_report}
