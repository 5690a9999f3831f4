"""The towers' typed settings (`model:` in a config file) and the strict base of every section."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    """A config section: unknown keys, wrong types and NaN are refused on load and on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class ModelConfig(Section):
    """The two towers."""

    tower: Literal["sasrec", "mean"] = Field(
        "sasrec", description="Query tower: sasrec (causal self-attention) or mean (running mean)."
    )
    dim: int = Field(256, ge=2, description="Embedding size d of both towers.")
    max_len: int = Field(20, ge=1, description="Query history length L.")
    num_layers: int = Field(2, ge=1, description="Transformer blocks (sasrec).")
    num_heads: int = Field(
        2, ge=1, description="Attention heads (sasrec); dim must be divisible by it."
    )
    ffn_dim: int | None = Field(
        None, ge=1, description="Width of each block's feed-forward layer; null = dim (SASRec's)."
    )
    dropout: float = Field(
        0.5, ge=0.0, lt=1.0, description="Embedding, attention and feed-forward dropout (sasrec)."
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

    @model_validator(mode="after")
    def _heads_divide_dim(self) -> ModelConfig:
        if self.tower == "sasrec" and self.dim % self.num_heads:
            raise ValueError(
                f"model.dim {self.dim} is not divisible by model.num_heads {self.num_heads} "
                "(each attention head takes dim / num_heads of the embedding)"
            )
        return self
