"""The query towers' settings (`model.tower`): one class per tower, chosen by its `name`.

Each tower's module (under `model/towers/`) defines its settings class, a subclass of
`TowerSettings` with its own keys and defaults, and registers it with the tower in one call
(`register_tower`). `model.config` validates a `tower:` mapping (or a bare name) against the
class its name picks. Torch-free: the CLI reads this at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from model.section import Section, settings_name, validate_named

DEFAULT_TOWER = "sasrec"  # the tower of a `tower:` mapping that names none
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


TOWERS: dict[str, tuple[type[TowerSettings], type[Any]]] = {}
T = TypeVar("T")


def register_tower(settings: type[TowerSettings]) -> Callable[[type[T]], type[T]]:
    """Class decorator: register a tower class under its settings' name.

    The tower class is built as `cls(settings, shape)` (`model.build.TowerShape`).
    """
    name = settings_name(settings)

    def add(cls: type[T]) -> type[T]:
        if name in TOWERS:
            raise ValueError(f"tower {name!r} registered twice")
        TOWERS[name] = (settings, cls)
        return cls

    return add


def tower_settings() -> dict[str, type[TowerSettings]]:
    """Name -> settings class of every registered tower."""
    return {name: settings for name, (settings, _) in TOWERS.items()}


def tower_class(name: str) -> type[Any]:
    """The module class registered under `name` (KeyError: no such tower)."""
    return TOWERS[name][1]


def validate_tower(value: Any, former_keys: dict[str, Any] | None = None) -> TowerSettings:
    """The settings class the tower's name picks, validated (a bare name is `{name: ...}`).

    `former_keys` are tower keys given at the top of `model:`, as configs written before
    towers had their own settings did; those the tower has join its settings (a key given in
    the tower mapping itself wins), the others were ignored by that tower then and are now.
    """
    mapping = {"name": value} if isinstance(value, str) else value
    if former_keys and isinstance(mapping, dict):
        name = mapping.get("name", DEFAULT_TOWER)
        own = tower_settings().get(name)
        fields = own.model_fields if own is not None else {}
        mapping = {**{k: v for k, v in former_keys.items() if k in fields}, **mapping}
    return validate_named(mapping, tower_settings(), "tower", DEFAULT_TOWER)
