"""The towers' typed settings (`model:` in a config file); `Section` is every section's base."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainValidator, SerializeAsAny, model_validator

from model.section import Section
from model.tower_settings import (
    DEFAULT_TOWER,
    FORMER_MODEL_KEYS,
    TowerSettings,
    validate_tower,
)

__all__ = ["ModelConfig", "Section"]


def _tower(value: Any) -> TowerSettings:
    return validate_tower(value)  # torch-free: the settings registry needs no tower module


class ModelConfig(Section):
    """The two towers."""

    tower: Annotated[SerializeAsAny[TowerSettings], PlainValidator(_tower)] = Field(
        default_factory=lambda: _tower(DEFAULT_TOWER),
        description="The query tower: its `name` (sasrec, mean, fmlp, bsarec, lru) picks its "
        "settings class (model/tower_settings.py); a bare name takes that tower's defaults.",
    )
    dim: int = Field(256, ge=2, description="Embedding size d of both towers.")
    max_len: int = Field(20, ge=1, description="Query history length L.")
    dropout: float = Field(
        0.5,
        ge=0.0,
        lt=1.0,
        description="Dropout of the query tower's inputs and blocks (mean has none).",
    )
    share_embeddings: bool = Field(
        True, description="The item tower reuses the query tower's input item table."
    )
    temperature: float = Field(
        0.1, gt=0.0, description="logit = h . c / temperature (the recipe study's choice)."
    )
    learn_temperature: bool = Field(
        False, description="Train tau (on a log scale, from `temperature`); the bundle keeps it."
    )
    temperature_final: float | None = Field(
        None,
        gt=0.0,
        description="Anneal tau exponentially from `temperature` to this over the training "
        "budget, as the lr schedules do (the share of max_epochs' steps or of train.max_minutes "
        "done, whichever is further; a retrain runs it again over its own); null: fixed.",
    )
    normalize: bool = Field(
        True,
        description="L2-normalise both towers' outputs (cosine logits over the temperature); "
        "false: plain dot products h . c / temperature, as SASRec (set temperature 1 with it).",
    )

    @model_validator(mode="before")
    @classmethod
    def _former_tower_keys(cls, data: Any) -> Any:
        """`num_layers`, `num_heads`, `ffn_dim` at the top of `model:` (the former layout)."""
        if not isinstance(data, dict) or not any(k in data for k in FORMER_MODEL_KEYS):
            return data
        former = {k: data[k] for k in FORMER_MODEL_KEYS if k in data}
        rest = {k: v for k, v in data.items() if k not in FORMER_MODEL_KEYS}
        return {**rest, "tower": validate_tower(rest.get("tower", DEFAULT_TOWER), former)}

    @model_validator(mode="after")
    def _tower_fits_the_sizes(self) -> ModelConfig:
        self.tower.check_sizes(self.dim, self.max_len)
        return self
