"""What a training did (`TrainResult`): the `recsys train --json` payload and a bundle's figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TrainResult:
    """What `train()` did; `to_json()` is the `recsys train --json` payload."""

    version: str
    dataset: str
    sampler: str
    num_negatives: int | None
    metrics: dict[str, dict[str, float]]
    train_seconds: float
    epochs: int
    seconds_per_epoch: float
    device: str
    threads: int
    precision: str  # the matmuls' precision used (`train.precision` "auto" resolved)
    # epochs planned on the val events too (`training.workflows.refit`); a time cap may cut the last
    refit_epochs: int = 0
    bundle: str | None = None
    run_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """All fields as a JSON-ready dict."""
        return asdict(self)
