"""The jobs the CLI runs: train (the pipeline), refit, retrain with its warm start and gate, tune.

Each builds on `training.loop` and `training.evaluation`; nothing below imports a workflow.
"""
