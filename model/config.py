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

__all__ = ["SAVED_WITHOUT", "ModelConfig", "Section", "as_saved"]

# keys whose default has changed since models were first saved: a saved model section (a
# bundle's manifest, a run's config, a benchmark record) without one was trained at this value
# (`normalize` and `init_std` came later, when every model was L2-normalised and initialised
# as `init_std: null` does; a hand-written section may lack the others)
SAVED_WITHOUT: dict[str, object] = {
    "tower": "sasrec", "normalize": True, "temperature": 0.1, "init_std": None,
}  # fmt: skip
# the same for a saved tower section, by tower (bsarec's low-pass was causal before `window`)
TOWER_SAVED_WITHOUT: dict[str, dict[str, object]] = {"bsarec": {"window": "causal"}}


def as_saved(model: dict[str, Any]) -> dict[str, Any]:
    """A saved model section with the values it was trained at for the keys it predates."""
    saved = {**SAVED_WITHOUT, **model}
    tower = saved["tower"]
    if isinstance(tower, dict):
        saved["tower"] = {**TOWER_SAVED_WITHOUT.get(tower.get("name", ""), {}), **tower}
    return saved


def _tower(value: Any) -> TowerSettings:
    return validate_tower(value)  # torch-free: the settings registry needs no tower module


class ModelConfig(Section):
    """The two towers.

    The defaults are the query-tower study's chosen configuration (docs/benchmarks/
    query-towers.md): bsarec at the published models' sizes but d = 128, its low-pass over the
    whole window, with dot-product logits.
    """

    tower: Annotated[SerializeAsAny[TowerSettings], PlainValidator(_tower)] = Field(
        default_factory=lambda: _tower(DEFAULT_TOWER),
        description="The query tower: its `name` (sasrec, mean, fmlp, bsarec, lru) picks its "
        "settings class (model/tower_settings.py); a bare name takes that tower's defaults.",
    )
    dim: int = Field(128, ge=2, description="Embedding size d of both towers.")
    max_len: int = Field(50, ge=1, description="Query history length L.")
    dropout: float = Field(
        0.5,
        ge=0.0,
        lt=1.0,
        description="Dropout of the query tower's inputs and blocks (mean has none).",
    )
    init_std: float | None = Field(
        0.02,
        gt=0.0,
        description="Initialise every linear layer's and id table's weights ~ N(0, init_std^2), "
        "biases zero, as the published SASRec-family code does (0.02); null: tables ~ N(0, 1 / "
        "d), layers as PyTorch initialises them.",
    )
    share_embeddings: bool = Field(
        True, description="The item tower reuses the query tower's input item table."
    )
    temperature: float = Field(
        1.0,
        gt=0.0,
        description="logit = h . c / temperature (1 with dot products; about 0.1 with "
        "normalize: cosine logits in [-1, 1] need it to sharpen).",
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
        False,
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
