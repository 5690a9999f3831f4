"""Settings a benchmark asks of every sampler, each sampler keeping the keys it has."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training.config import register_samplers
from training.sampler_settings import settings_class


def own_keys(name: str, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """Those of `wanted` that sampler `name`'s settings class has; none for an unknown name.

    `wanted` is what a benchmark sets for every sampler it runs, though not all have each key
    (`num_negatives`: not the full softmax; `per_query`: not tapas). An unknown name is left
    for validation to refuse.
    """
    register_samplers()
    settings = settings_class(name)
    keys = settings.model_fields if settings is not None else {}
    return {key: value for key, value in wanted.items() if key in keys}
