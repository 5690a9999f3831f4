"""The benchmark pages of docs/benchmarks/ and the README's result tables, written from the records.

Every measured figure of those pages sits between `<!-- generated:NAME -->` and
`<!-- /generated:NAME -->`, and only this package writes there (`pages.py` says which block of
which page, `quality.py`, `choice.py` and `operations.py`
build them from `benchmarks/results/`); the prose
around them is hand-written and holds no figure. `python -m benchmarks docs-pages` writes every
block; `--check` writes nothing and fails on a block that differs from its records.
"""
