"""The named grids of `recsys bench quality --grid NAME`, and which of them skip the test split."""

from __future__ import annotations

from app.bench.recipe_grid import recipe
from app.bench.sweep_grid import Planner, catalogue, comparison

GRIDS: dict[str, Planner] = {"comparison": comparison, "catalogue": catalogue, "recipe": recipe}
VALIDATION_ONLY = frozenset({"recipe"})  # a study chosen on val: its runs never rank test
