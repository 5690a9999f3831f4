"""The query towers' settings (`model.tower`): one class per tower, chosen by its `name`.

A tower's settings class is a subclass of `TowerSettings` with its own keys and defaults; its
module class is registered with it in one call (`@register_tower(Settings)`), which also adds
the settings to the registry. The built-in towers' settings are defined here, below, so that
a manifest or a config validates without torch (`recsys models list` reads every manifest and
never imports it); a tower defined elsewhere keeps its settings in its own module.
`model.config` validates a `tower:` mapping (or a bare name) against the class its name picks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field, model_validator

from model.section import Section, settings_name, validate_named

DEFAULT_TOWER = "bsarec"  # the tower of a `tower:` mapping that names none
# keys every tower but `mean` had at the top of `model:` before towers had their own settings
FORMER_MODEL_KEYS = ("num_layers", "num_heads", "ffn_dim")


class TowerSettings(Section):
    """What every tower's settings hold: its name, and a check against the model's sizes.

    Class attribute `search_space`: what `recsys tune` searches of the tower's own keys, as
    key -> ("int", low, high), ("float", low, high) or ("choice", [options]).
    """

    name: str
    search_space: ClassVar[dict[str, tuple[Any, ...]]] = {}

    def check_sizes(self, dim: int, max_len: int) -> None:
        """Raise `ValueError` when this tower cannot be built at width `dim`, length `max_len`."""

    def sees_later_items(self) -> bool:
        """True when a position's output depends on later items of its window (not causal)."""
        return False


class BlockSettings(TowerSettings):
    """A tower of residual blocks, each a sequence mixer and a position-wise feed-forward layer."""

    num_layers: int = Field(2, ge=1, description="Blocks.")
    ffn_dim: int | None = Field(
        None,
        ge=1,
        description="Width of each block's feed-forward layer; null: the tower's own (sasrec: "
        "d, as SASRec; fmlp, bsarec, lru: 4 d, as published).",
    )
    ffn_factor: ClassVar[int] = 1  # the width of a null ffn_dim, in units of d
    search_space: ClassVar[dict[str, tuple[Any, ...]]] = {"num_layers": ("int", 1, 3)}

    def ffn_width(self, dim: int) -> int:
        """The feed-forward width at embedding size `dim`."""
        return self.ffn_dim or self.ffn_factor * dim


class AttentionSettings(BlockSettings):
    """Blocks whose mixer includes multi-head self-attention."""

    num_heads: int = Field(2, ge=1, description="Attention heads; dim must be divisible by it.")
    search_space: ClassVar[dict[str, tuple[Any, ...]]] = {
        **BlockSettings.search_space,
        "num_heads": ("choice", [1, 2]),
    }

    def check_sizes(self, dim: int, max_len: int) -> None:
        """Each head takes dim / num_heads of the embedding."""
        if dim % self.num_heads:
            raise ValueError(
                f"model.dim {dim} is not divisible by model.tower.num_heads {self.num_heads} "
                "(each attention head takes dim / num_heads of the embedding)"
            )


SETTINGS: dict[str, type[TowerSettings]] = {}  # name -> settings class
CLASSES: dict[str, type[Any]] = {}  # name -> the tower's module class, once its module is imported
T = TypeVar("T")


def register_tower(settings: type[TowerSettings]) -> Callable[[type[T]], type[T]]:
    """Class decorator: register a tower's module class under its settings' name.

    The tower class is built as `cls(settings, shape)` (`model.towers.base.TowerShape`).
    """
    name = register_settings(settings)

    def add(cls: type[T]) -> type[T]:
        if name in CLASSES:
            raise ValueError(f"tower {name!r} registered twice")
        CLASSES[name] = cls
        return cls

    return add


def register_settings(settings: type[TowerSettings]) -> str:
    """Add a tower's settings class to the registry (again: the same class only); its name."""
    name = settings_name(settings)
    if SETTINGS.setdefault(name, settings) is not settings:
        raise ValueError(f"tower {name!r} registered twice")
    return name


def tower_settings() -> dict[str, type[TowerSettings]]:
    """Name -> settings class of every registered tower."""
    return dict(SETTINGS)


def tower_class(name: str) -> type[Any]:
    """The module class registered under `name` (KeyError: its module is not imported)."""
    return CLASSES[name]


def validate_tower(value: Any, former_keys: dict[str, Any] | None = None) -> TowerSettings:
    """The settings class the tower's name picks, validated (a bare name is `{name: ...}`).

    `former_keys` are tower keys given at the top of `model:`, as configs written before
    towers had their own settings did (or `--set model.num_layers=3`); those the tower has join
    its settings, over the tower mapping's own (the former spelling is only ever given on
    purpose), the others were ignored by that tower then and are now.
    """
    mapping = {"name": value} if isinstance(value, str) else value
    if former_keys and isinstance(mapping, dict):
        name = mapping.get("name", DEFAULT_TOWER)
        own = tower_settings().get(name)
        fields = own.model_fields if own is not None else {}
        mapping = {**mapping, **{k: v for k, v in former_keys.items() if k in fields}}
    return validate_named(mapping, tower_settings(), "tower", DEFAULT_TOWER)


# the built-in towers (their module classes: model/towers/)


class SasrecSettings(AttentionSettings):
    """`sasrec`: causal multi-head self-attention blocks (SASRec); ffn_dim null: d."""

    name: Literal["sasrec"] = "sasrec"


class MeanSettings(TowerSettings):
    """`mean`: a causal running mean of the input embeddings, then a map; no keys."""

    name: Literal["mean"] = "mean"


class FmlpSettings(BlockSettings):
    """`fmlp`: learnable frequency-domain filter blocks (FMLP-Rec); ffn_dim null: 4 d."""

    name: Literal["fmlp"] = "fmlp"
    ffn_factor: ClassVar[int] = 4


class BsarecSettings(AttentionSettings):
    """`bsarec`: attention mixed with a frequency rescaling (BSARec); published alpha 0.7, c 5."""

    name: Literal["bsarec"] = "bsarec"
    num_heads: int = Field(1, ge=1, description="Attention heads; dim must be divisible by it.")
    alpha: float = Field(
        0.7, ge=0.0, le=1.0, description="The frequency view's share; 1 - alpha: attention's."
    )
    cutoff: int = Field(
        5, ge=1, description="c: the low band is the window's lowest c // 2 + 1 frequencies."
    )
    window: Literal["causal", "whole"] = Field(
        "whole",
        description="causal: position t is low-passed over the L items ending at t; whole: "
        "over the whole window, as BSARec's code (every position sees the window's later "
        "items: needs train.targets=last, where only the last position is trained).",
    )
    padding: Literal["zero", "embedded"] = Field(
        "zero",
        description="zero: a padded position is zero and a window as wide as its batch's "
        "longest history; embedded: as BSARec's code, every window max_len wide and a padded "
        "position carries its position embedding through the blocks, its attention over the "
        "whole window, into the low-pass (padded positions see later items: needs "
        "train.targets=last).",
    )
    ffn_factor: ClassVar[int] = 4
    search_space: ClassVar[dict[str, tuple[Any, ...]]] = {
        **AttentionSettings.search_space,
        "alpha": ("float", 0.1, 0.9),
        "cutoff": ("int", 1, 9),
    }

    def sees_later_items(self) -> bool:
        """Later items reach earlier positions: the whole-window low-pass, embedded padding."""
        return self.window == "whole" or self.padding == "embedded"


class LruSettings(BlockSettings):
    """`lru`: linear recurrent unit blocks (LRURec); published r in [0.8, 0.99], 4 d wide."""

    name: Literal["lru"] = "lru"
    r_min: float = Field(0.8, ge=0.0, lt=1.0, description="Smallest initial |lambda|.")
    r_max: float = Field(0.99, gt=0.0, lt=1.0, description="Largest initial |lambda|.")
    ffn_factor: ClassVar[int] = 4
    search_space: ClassVar[dict[str, tuple[Any, ...]]] = {
        **BlockSettings.search_space,
        "r_min": ("float", 0.0, 0.9),
    }

    @model_validator(mode="after")
    def _ordered_radii(self) -> LruSettings:
        if self.r_min > self.r_max:
            raise ValueError(f"r_min {self.r_min} is above r_max {self.r_max}")
        return self


for _settings in (SasrecSettings, MeanSettings, FmlpSettings, BsarecSettings, LruSettings):
    register_settings(_settings)
