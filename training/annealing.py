"""`annealed_temperature`: a temperature along the training budget.

`model.temperature_final` and TAPAS's second pass anneal from a starting temperature to a final
one as the training clock (`training.loop.clock`) moves from 0 to 1.
"""

from __future__ import annotations


def annealed_temperature(start: float, final: float | None, how: str, fraction: float) -> float:
    """The temperature at `fraction` in [0, 1] of training: `start` -> `final` (None: constant).

    `how`: `exponential` (geometric: the midpoint is sqrt(start * final)) or `linear`.
    """
    if final is None:
        return start
    p = min(1.0, max(0.0, fraction))
    if how == "linear":
        return start + (final - start) * p
    return start * (final / start) ** p
