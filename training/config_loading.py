"""Building a `RecsysConfig`: defaults, a base config, YAML files, then `--set a.b=c` overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from data.errors import RecsysInputError
from training.config import RecsysConfig


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


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
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


def load_config(
    paths: list[Path] | None = None,
    overrides: list[str] | None = None,
    base: dict[str, Any] | None = None,
) -> RecsysConfig:
    """Build the config: defaults, `base`, then each YAML file in order, then `--set` overrides.

    Args:
        paths: YAML files.
        overrides: `section.key=value` texts.
        base: A whole config to start from (a served model's, for a retrain).

    Raises:
        RecsysInputError: unknown key, bad value, unreadable file; the message names the key.

    """
    raw: dict[str, Any] = dict(base or {})
    for path in paths or []:
        raw = _deep_merge(raw, _read_yaml(Path(path)))
    for text in overrides or []:
        keys, value = parse_override(text)
        patch: dict[str, Any] = {keys[-1]: value}
        for key in reversed(keys[:-1]):
            patch = {key: patch}
        raw = _deep_merge(raw, patch)
    try:
        return RecsysConfig.model_validate(raw)
    except ValidationError as err:
        raise RecsysInputError(_describe(err)) from None
