"""Model quality per sampler and recipe: `bench quality`, its named grids and their reports.

`bench quality` writes one record per run and resumes; the grids are the sampler comparison,
the 1e6-item catalogue, the recipe study and the final grid. Import order, lowest first:
`run_records`, `reuse`, `sweep_grid`, `recipe_grid`, `sweep`, `final_grid`, `recipe_report`,
`grids`, then `quality` and `sweep_report`.
"""
