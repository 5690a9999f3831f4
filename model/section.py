"""The strict base of every config section, and the rule by which a `name` picks its settings.

A component with kinds (the sampler, the query tower) keeps one settings class per kind in a
registry; a config names the kind in `name` and gives that class's own keys beside it.
`validate_named` checks such a mapping against the class its name picks. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails


class Section(BaseModel):
    """A config section: unknown keys, wrong types and NaN are refused on load and on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


S = TypeVar("S", bound=Section)


def settings_name(settings: type[Section]) -> str:
    """The `name` a settings class answers to (its `name` field's default)."""
    field = settings.model_fields.get("name")
    name = field.default if field is not None else None
    if not isinstance(name, str):
        raise TypeError(f"{settings.__name__}.name needs a default: the kind's name")
    return name


def validate_named(value: Any, registry: Mapping[str, type[S]], kind: str, default: str) -> S:
    """The settings class `value["name"]` picks from `registry`, validated.

    Args:
        value: A mapping (`name` and that kind's keys), a bare name, or settings already made.
        registry: Name -> settings class of every registered kind.
        kind: What the section is called in messages (`sampler`, `tower`).
        default: The name of a mapping that gives none.

    Raises:
        ValidationError: at `name` for an unknown kind (the message lists the known ones), at
            a key the chosen kind does not have (the message lists its keys).

    """
    if isinstance(value, tuple(registry.values())):
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping: name and the {kind}'s settings")
    name = value.get("name", default)
    settings = registry.get(name) if isinstance(name, str) else None
    if settings is None:
        known = ", ".join(sorted(registry))
        raise named_error(kind, "name", name, f"unknown {kind} {name!r}; known: {known}")
    unknown = [key for key in value if key not in settings.model_fields]
    if unknown:
        keys = ", ".join(settings.model_fields)
        message = f"not a key of the {name} {kind}; its keys: {keys}"
        raise named_error(kind, unknown[0], value[unknown[0]], message)
    return settings.model_validate(value)


def named_error(kind: str, key: str, value: Any, message: str) -> ValidationError:
    """A validation error at `<kind>.<key>`, as pydantic reports a field's."""
    detail = InitErrorDetails(
        type="value_error", loc=(key,), input=value, ctx={"error": ValueError(message)}
    )
    return ValidationError.from_exception_data(kind, [detail])
