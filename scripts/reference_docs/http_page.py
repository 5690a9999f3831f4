"""docs/reference/http-api.md (and openapi.json) from the FastAPI app's OpenAPI schema.

The app is built with default settings over an empty temporary home, never started: the
schema is what `recsys serve` publishes at `/openapi.json`, route by route.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from scripts.reference_docs.markdown import anchor, bound, code, first_paragraph, paragraphs, table

REF = "#/components/schemas/"
METHODS = ("get", "put", "post", "delete", "patch")


@cache
def schema() -> dict[str, Any]:
    """The app's OpenAPI schema (built once per process)."""
    from app.api.main import create_app
    from app.api.settings import Settings

    with tempfile.TemporaryDirectory() as home:
        # model_construct: the defaults, not whatever RECSYS_* variables this shell has
        return create_app(Settings.model_construct(home=Path(home))).openapi()


def openapi_json() -> str:
    """The schema as the committed docs/reference/openapi.json."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def render(command_line: str) -> str:
    """The whole page; `command_line` is the command that writes it."""
    spec = schema()
    info = spec["info"]
    routes = [
        (method, path, op)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if method in METHODS
    ]
    contents = [f"- [`{m.upper()} {p}`](#{anchor(f'{m} {p}')})" for m, p, _ in routes]
    contents.append("- [Schemas](#schemas)")
    head = (
        "# HTTP API reference\n\n"
        f"Every route of the server (`recsys serve`), generated from its OpenAPI schema by "
        f"`{command_line}`; do not edit it by hand.\n\n"
        f"{info.get('summary') or info['title']} API version {info['version']}. A running "
        "server publishes the same schema at `/openapi.json` and an interactive page at "
        "`/docs`; the schema as a file: [openapi.json](openapi.json).\n\n"
    )
    schemas = [_schema_section(name, s) for name, s in spec["components"]["schemas"].items()]
    parts = [head + "\n".join(contents), *(_route(*r) for r in routes), "## Schemas", *schemas]
    return "\n\n".join(parts) + "\n"


def _route(method: str, path: str, op: dict[str, Any]) -> str:
    """One route: what it does, its parameters, its body and its responses."""
    parts = [f"## {method.upper()} {path}"]
    if not _generated_summary(op):
        parts.append(f"**{op['summary']}**")
    parts.append(paragraphs(op.get("description")))
    if params := op.get("parameters"):
        columns = ("Parameter", "In", "Type", "Required", "Default", "Description")
        parts.append(table(columns, map(_parameter, params)))
    if body := op.get("requestBody"):
        parts.append(_body(body))
    header = ("Status", "Meaning", "Body")
    responses = sorted(op["responses"].items(), key=lambda item: str(item[0]))
    rows = [(code(status), r.get("description", ""), _content(r)) for status, r in responses]
    parts.append(table(header, rows))
    return "\n\n".join(part for part in parts if part)


def _generated_summary(op: dict[str, Any]) -> bool:
    """True for FastAPI's own summary (the function's name in title case), which says nothing."""
    name = op.get("summary", "").lower().replace(" ", "_")
    return not name or op.get("operationId", "").startswith(f"{name}_")


def _parameter(param: dict[str, Any]) -> tuple[str, ...]:
    """A query, path or header parameter's row."""
    s = param.get("schema", {})
    required = "yes" if param.get("required") else "no"
    default = code(s["default"]) if "default" in s else ""
    description = param.get("description") or s.get("description", "")
    return (f"`{param['name']}`", param["in"], _type(s), required, default, description)


def _body(body: dict[str, Any]) -> str:
    """The request body: its media types and, for a schema of ours, its fields."""
    required = "required" if body.get("required") else "optional"
    lines = [f"Request body ({required}): {_content(body)}."]
    for content in body["content"].values():
        ref = content.get("schema", {}).get("$ref", "")
        if ref.startswith(REF):
            lines.append(_fields(schema()["components"]["schemas"][ref.removeprefix(REF)]))
    return "\n\n".join(lines)


def _content(message: dict[str, Any]) -> str:
    """The schemas of a response's or body's media types ('' for none)."""
    kinds = message.get("content", {})
    return ", ".join(f"{_type(c.get('schema', {}))} (`{k}`)" for k, c in kinds.items())


def _schema_section(name: str, s: dict[str, Any]) -> str:
    """One schema of `components`: its description and its fields."""
    parts = [f"### {name}", first_paragraph(s.get("description"))]
    parts.append(_fields(s) if "properties" in s else f"Type: {_type(s)}.")
    return "\n\n".join(part for part in parts if part)


def _fields(s: dict[str, Any]) -> str:
    """An object schema's properties as a table, and whether others are refused."""
    required = set(s.get("required", ()))
    rows = [
        (f"`{key}`", _type(prop), "yes" if key in required else "no",
         code(prop["default"]) if "default" in prop else "", prop.get("description", ""))
        for key, prop in s["properties"].items()
    ]  # fmt: skip
    text = table(("Field", "Type", "Required", "Default", "Description"), rows)
    if s.get("additionalProperties") is False:
        text += "\n\nAny other field is refused (422)."
    return text


def _type(s: dict[str, Any]) -> str:
    """A JSON schema in words: a link to a named schema, or its type with its limits."""
    if ref := s.get("$ref"):
        name = ref.removeprefix(REF)
        return f"[{name}](#{anchor(name)})"
    if variants := s.get("anyOf") or s.get("oneOf"):
        return " or ".join(_type(v) for v in variants)
    if "enum" in s:
        return "one of " + ", ".join(code(v) for v in s["enum"])
    if "const" in s:
        return code(s["const"])
    kind = s.get("type", "any")
    if kind == "array":
        limits = bound(s.get("minItems"), s.get("maxItems"))
        return f"array{f' ({limits} items)' if limits else ''} of {_inner(s.get('items', {}))}"
    if kind == "object" and isinstance(s.get("additionalProperties"), dict):
        return f"object of {_inner(s['additionalProperties'])}"
    label = " ".join(filter(None, (kind, s.get("format", ""))))
    return f"{label} ({limits})" if (limits := _limits(s)) else label


def _inner(s: dict[str, Any]) -> str:
    """An element's type, in parentheses when it is a choice ('array of (a or b)')."""
    label = _type(s)
    return f"({label})" if " or " in label else label


def _limits(s: dict[str, Any]) -> str:
    """A number's range, a string's length and pattern ('' for none)."""
    low = s.get("exclusiveMinimum", s.get("minimum"))
    high = s.get("exclusiveMaximum", s.get("maximum"))
    exclusive = ("exclusiveMinimum" in s, "exclusiveMaximum" in s)
    parts = [bound(low, high, exclusive)]
    if length := bound(s.get("minLength"), s.get("maxLength")):
        parts.append(f"length {length}")
    if "pattern" in s:
        parts.append(f"matching `{s['pattern']}`")
    return ", ".join(filter(None, parts))
