"""The inference artefact: the towers, their typed config, and the bundle format.

Training writes bundles and serving reads them, both through this package, so the service
never depends on the trainer. May import: `data`, torch, numpy, polars, pydantic; never
`training`, `serving` or `app`.
"""
