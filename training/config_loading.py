"""Building a `RecsysConfig`: the run config of train, retrain and tune, from its layers.

Layers, later ones winning: the defaults < `base` (a served model's config) < the sampler
`--sampler` names (its settings class's defaults and what it pairs with in other sections) <
each YAML file < each `--set a.b=c` override < the explicit options (`--num-negatives`, ...).
`build_run_config` validates the result and checks it once: names, clashes, the accelerator.
`stored_config` reads a config an earlier version wrote (a bundle's manifest, a run's
hparams) in today's format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from data.errors import RecsysInputError
from model.config import SAVED_WITHOUT as MODEL_SAVED_WITHOUT
from model.config import as_saved as model_as_saved
from training.combinations import refuse_clashes, refuse_missing_accelerator
from training.config import RecsysConfig, register_samplers
from training.sampler_settings import AnySampler, settings_class

Layer = dict[str, Any]  # a config, or part of one: section -> key -> value
# keys added after run configs were first saved whose default has changed since: a saved
# section without one was run at this value
# (the weight average and AdamW's form came after saved configs, off then)
SAVED_WITHOUT: dict[str, Layer] = {
    "model": MODEL_SAVED_WITHOUT,
    "train": {"targets": "all", "ema_decay": None, "decoupled_weight_decay": False},
}


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split `a.b=c` into (["a", "b"], c) with c parsed as a YAML scalar."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RecsysInputError(f"--set expects section.key=value, got {text!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        raise RecsysInputError(f"--set {text!r}: the value is not valid YAML") from None
    return key.strip().split("."), value


def _override_layer(text: str) -> Layer:
    keys, value = parse_override(text)
    patch: Layer = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        patch = {key: patch}
    return patch


def _deep_merge(base: Layer, extra: Mapping[str, Any]) -> Layer:
    """`extra` over `base`; a mapping over a bare name (`tower: fmlp`) extends `{name: fmlp}`.

    A bare name over a mapping that names none (`tower.window=whole`, then `tower=bsarec`)
    names it; over a named mapping it starts afresh, with that tower's defaults.
    """
    merged = dict(base)
    for key, value in extra.items():
        old = merged.get(key)
        if isinstance(value, dict) and isinstance(old, str):
            old = {"name": old}
        if isinstance(value, str) and isinstance(old, dict) and "name" not in old:
            value = {**old, "name": value}
        if isinstance(value, dict) and isinstance(old, dict):
            merged[key] = _deep_merge(old, value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> Layer:
    try:
        loaded = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RecsysInputError(f"{path}: config file not found") from None
    except OSError as err:
        raise RecsysInputError(f"{path}: cannot read config ({err.strerror})") from None
    except UnicodeDecodeError:
        raise RecsysInputError(f"{path}: not UTF-8 text, so not a YAML config") from None
    except yaml.YAMLError as err:
        raise RecsysInputError(f"{path}: not valid YAML ({err})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise RecsysInputError(f"{path}: a config must be a mapping of sections")
    return loaded


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"config {where}: {message}{more}"


def _validated(raw: Layer) -> RecsysConfig:
    try:
        return RecsysConfig.model_validate(raw)
    except ValidationError as err:
        raise RecsysInputError(_describe(err)) from None


def load_config(
    paths: Iterable[Path] = (), overrides: Iterable[str] = (), base: Layer | None = None
) -> RecsysConfig:
    """The config of `base`, then each YAML file in order, then `--set` overrides, validated.

    Raises:
        RecsysInputError: unknown key, bad value, unreadable file; the message names the key.

    """
    layers = [*(_read_yaml(Path(path)) for path in paths), *map(_override_layer, overrides)]
    return _validated(_on_base(base or {}, layers))


def _on_base(base: Layer, layers: list[Layer]) -> Layer:
    """`base` with `layers` merged on top, in order.

    Where a layer names another sampler than the layers before it, their sampler keys that
    the new sampler does not have are dropped (`--set sampler.name=...` over a config file
    such as configs/default.yaml); the keys they share stay, the later layer's winning. The
    base is held against the sampler the layers end on, so a retrain that names its served
    model's sampler again keeps that model's settings.
    """
    later: Layer = {}
    for layer in layers:
        later = _deep_merge(_for_its_sampler(later, layer), layer)
    return _deep_merge(_for_its_sampler(base, later), later)


def _for_its_sampler(merged: Layer, layer: Layer) -> Layer:
    """`merged` less the sampler keys that the other sampler `layer` names does not have."""
    section, kept = layer.get("sampler"), merged.get("sampler")
    name = section.get("name") if isinstance(section, dict) else None
    settings = _settings_class(name)
    if not isinstance(kept, dict) or settings is None or name == kept.get("name"):
        return merged
    return {**merged, "sampler": {k: v for k, v in kept.items() if k in settings.model_fields}}


def build_run_config(
    config_files: Sequence[Path] = (),
    overrides: Sequence[str] = (),
    *,
    sampler: str | None = None,
    num_negatives: int | None = None,
    max_epochs: int | None = None,
    base: Layer | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> RecsysConfig:
    """The run config of `recsys train`, `retrain` and `tune`, validated and checked once.

    Args:
        config_files: YAML files, applied in order.
        overrides: `section.key=value` texts (`--set`), applied in order after the files.
        sampler: `--sampler`: the sampler, over everything else, starting from its own
            defaults (whatever `base` had) and what it pairs with in other sections, under
            the files and overrides; over a `base`, the model it pairs with is not set (a
            retrain keeps the served model: one that does not suit the sampler is refused).
        num_negatives: `--num-negatives`, over everything else.
        max_epochs: `--max-epochs`, over everything else.
        base: A whole config to start from (a served model's, for a retrain).
        options: Other explicit options, section -> key -> value, over everything else.

    Raises:
        RecsysInputError: an unknown sampler, loss or key, a bad value, an unreadable file,
            settings that cannot train together, an accelerator this machine lacks.

    """
    layers = [
        *_sampler_layers(sampler, keep_model=base is not None),
        *(_read_yaml(Path(path)) for path in config_files),
        *map(_override_layer, overrides),
        _options_layer(sampler, num_negatives, max_epochs, options or {}),
    ]
    if sampler is not None and base is not None:
        base = {key: value for key, value in base.items() if key != "sampler"}
    cfg = _validated(_on_base(base or {}, layers))
    _refuse_an_unknown_loss(cfg.loss.name)
    refuse_clashes(cfg)  # before any lock, ingest or study: a fixed command then starts clean
    refuse_missing_accelerator(cfg.train.accelerator)
    return cfg


def _sampler_layers(sampler: str | None, keep_model: bool) -> list[Layer]:
    """What `--sampler NAME` sets: the sampler, then what it pairs with in other sections.

    `keep_model`: leave out what it pairs with in `model` (the served model stays as trained).
    """
    if sampler is None:
        return []
    settings = _settings_class(sampler)  # None: validation names the known samplers
    pairs = dict(settings.pairs_with) if settings else {}
    if keep_model:
        pairs.pop("model", None)
    return [{"sampler": {"name": sampler}}, pairs]


def _options_layer(
    sampler: str | None,
    num_negatives: int | None,
    max_epochs: int | None,
    options: Mapping[str, Mapping[str, Any]],
) -> Layer:
    if num_negatives is not None and num_negatives < 1:
        raise RecsysInputError("--num-negatives must be >= 1")
    if max_epochs is not None and max_epochs < 1:
        raise RecsysInputError("--max-epochs must be >= 1")
    layer: Layer = {section: dict(values) for section, values in options.items()}
    if sampler is not None:
        layer.setdefault("sampler", {})["name"] = sampler
    if num_negatives is not None:
        layer.setdefault("sampler", {})["num_negatives"] = num_negatives
    if max_epochs is not None:
        layer.setdefault("train", {})["max_epochs"] = max_epochs
    return layer


def _settings_class(name: Any) -> type[AnySampler] | None:
    register_samplers()
    return settings_class(name)


def _refuse_an_unknown_loss(name: str) -> None:
    from training.losses import SAMPLED_LOSSES  # torch: imported when a run is configured

    if name not in SAMPLED_LOSSES:
        known = ", ".join(sorted(SAMPLED_LOSSES))
        raise RecsysInputError(f"config loss.name: unknown loss {name!r}; known: {known}")


def load_stored_config(path: Path) -> RecsysConfig:
    """The config an earlier run saved as YAML (its `hparams.yaml`), in today's format."""
    return _validated(stored_config(_read_yaml(path)))


# The flat `sampler:` section written before each sampler had its own settings class: every
# sampler's keys in one section, most behind a prefix naming their sampler (`tapas_ratio`).
_FLAT_PREFIXES = {
    "popularity": "popularity_", "bernoulli": "popularity_", "mixed": "popularity_",
    "quadratic": "kernel_", "rff": "rff_", "exact": "exact_", "tapas": "tapas_",
}  # fmt: skip


def stored_config(config: Layer) -> Layer:
    """`config` as written by an earlier run (a manifest's, a run's hparams), in today's format.

    A key its sections predate takes the value they were run at (`SAVED_WITHOUT`). A former
    flat sampler section (it has `popularity_floor`, as every one had and no
    sampler's own settings have) becomes the named sampler's own keys, with the values the run
    used, so a model published before keeps retraining as it was trained.
    """
    config = as_saved(config)
    flat = config.get("sampler")
    if not isinstance(flat, dict) or "popularity_floor" not in flat:
        return config
    name = flat.get("name", "uniform")  # the default when flat sections were written
    settings = _settings_class(name)
    if settings is None:
        return config  # validation names the known samplers
    prefix = _FLAT_PREFIXES.get(name, "")
    own = {key.removeprefix(prefix): value for key, value in {**flat, "name": name}.items()}
    return {**config, "sampler": {k: v for k, v in own.items() if k in settings.model_fields}}


def as_saved(config: Layer) -> Layer:
    """`config`'s sections with the values they were run at for the keys they predate."""
    return {section: saved_section(section, values) for section, values in config.items()}


def saved_section(section: str, values: Any) -> Any:
    """A saved section with the values it was run at for the keys it predates (a tower's too)."""
    if not isinstance(values, dict) or section not in SAVED_WITHOUT:
        return values
    return model_as_saved(values) if section == "model" else {**SAVED_WITHOUT[section], **values}
