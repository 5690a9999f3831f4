"""The training loop: the LightningModule, its data, the Trainer and everything a fit runs.

Batches and loaders, the optimiser and its schedule, precision, checkpoints, early stopping,
the time cap, progress, and the data-parallel ranks. May import: `model`, `data`, the
sampler, loss and correction modules of `training`, and `training.evaluation`; never
`training.workflows`.
"""
