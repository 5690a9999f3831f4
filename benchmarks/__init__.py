"""The benchmark harness: outside the installed product, above every package of it.

`python -m benchmarks <command>` (or `recsys bench <command>` from a checkout) runs the
benchmarks of `speed/` (timings) and `sweeps/` (model quality per sampler and recipe);
`python -m benchmarks.studies.<name>` runs a study of `studies/`. `harness/` holds what they
share, `records.py` the one result-record schema (every run writes
`results/<study>/<run>.json` through it) and `paths.py` the checkout's folders, which are only
ever the defaults of options.

They use the product's public API only (data, model, training, serving; of app, at most
`app.cli_common`), and nothing in the product imports them.
"""
