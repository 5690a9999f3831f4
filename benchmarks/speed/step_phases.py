"""Wall clocks on the phases of a timed training step, behind `bench train-step`'s rows.

It also counts the item rows each sampler update was handed (the step's touched rows, which
`step_traffic` prices).

A `PhaseClock` wraps the sampler's draw (`sample`, its log q included) and update (`update`,
`refresh`), the backward callable and every optimiser's `step` of one module in wall clocks,
without a profiler, so the timed step runs exactly as it would unwrapped. The rest of a step
(tower forward, the negatives' logits, corrections and loss, the step's bookkeeping) is
"forward and loss".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

DRAW, UPDATE, BACKWARD, OPTIMIZER, REST = (
    "draw", "sampler_update", "backward", "optimizer", "forward_and_loss",
)  # fmt: skip


class PhaseClock:
    """Seconds spent in each wrapped phase since the last `reset`."""

    def __init__(self) -> None:
        """No phase timed yet."""
        self.seconds: dict[str, float] = {}
        self.updated_rows: list[int] = []  # the rows of each sampler update: what a step moved

    def reset(self) -> None:
        """Forget what was timed (the warm-up step)."""
        self.seconds = {}
        self.updated_rows = []

    def touched_rows(self) -> float:
        """Mean distinct item rows per sampler update since the last reset (0 without one)."""
        return sum(self.updated_rows) / len(self.updated_rows) if self.updated_rows else 0.0

    def counted(self, update: Callable[..., Any]) -> Callable[..., Any]:
        """`update(item_idx, item_emb)` that also records how many rows it was handed."""

        def run(item_idx: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self.updated_rows.append(int(item_idx.numel()))
            return update(item_idx, *args, **kwargs)

        return run

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` with its wall time added to `phase` at each call."""

        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.seconds[phase] = self.seconds.get(phase, 0.0) + spent

        return run

    def attach(self, module: Any, optimizers: list[Any]) -> Callable[[torch.Tensor], None]:
        """Wrap `module`'s sampler and each optimiser in place; the backward callable to pass."""
        sampler = module.sampler
        if sampler is not None:
            sampler.sample = self.timed(DRAW, sampler.sample)
            sampler.update = self.timed(UPDATE, self.counted(sampler.update))
            sampler.refresh = self.timed(UPDATE, sampler.refresh)
        for opt in optimizers:
            opt.step = self.timed(OPTIMIZER, opt.step)
        return self.timed(BACKWARD, torch.Tensor.backward)

    def per_step_ms(self, step_ms: list[float]) -> dict[str, float]:
        """Mean milliseconds per step of each phase over the timed steps `step_ms`."""
        steps = len(step_ms)
        phases = {p: 1000 * self.seconds.get(p, 0.0) / steps for p in (DRAW, UPDATE, BACKWARD)}
        phases[OPTIMIZER] = 1000 * self.seconds.get(OPTIMIZER, 0.0) / steps
        phases[REST] = sum(step_ms) / steps - sum(phases.values())
        return {phase: round(ms, 3) for phase, ms in phases.items()}


def sampler_shape(module: Any) -> dict[str, Any]:
    """What a row says of the sampler as built: per query, the kernel's features, leaf size b.

    `features` is F, the kernel tree's feature count (2D for `rff`, d^2 + 1 for `quadratic`),
    and `leaf_size` its bucket size b as built (at least ceil(F / d)); None without a tree.
    """
    sampler = module.sampler
    tree = getattr(sampler, "tree", None)
    return {
        "per_query": None if sampler is None else bool(getattr(sampler, "per_query", False)),
        "features": None if tree is None else int(tree.fmap.dim),
        "leaf_size": None if tree is None else int(tree.b),
    }
