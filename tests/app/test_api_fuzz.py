"""OpenAPI fuzzing of the real server (slow: `make test-all`, or `pytest -m slow -k fuzz`).

schemathesis generates requests from `/openapi.json` for every route (the admin routes with
the token set) and checks each answer: no 5xx, a documented status code and content type,
and a body that matches the documented schema. Each operation is fuzzed with valid input
(positive mode) and, where it has query or body parameters, with input that breaks its
schema (negative mode: the error contract). CASES_PER_MODE per mode gives over 1,000
requests (hypothesis stops early on the operations where nothing varies).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from data.workspace import Workspace
from tests.serving.bundles import make_bundle
from tests.serving.server import running_server

CASES_PER_MODE = 120
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
TOKEN = "fuzz-token"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _modes(operation: Any) -> tuple[GenerationMode, ...]:
    """Both modes where a query or body parameter can break its schema; else positive only.

    Path parameters (item ids) and headers (the admin token) are any string: nothing to break.
    """
    return MODES if len(operation.query) + len(operation.body) else MODES[:1]


def _fuzz(operation: object, mode: GenerationMode, base_url: str, sent: list[str]) -> None:
    """Run CASES_PER_MODE requests of `mode` against one operation; raises on a failure."""

    @settings(
        max_examples=CASES_PER_MODE, deadline=None, database=None, derandomize=True,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(case=operation.as_strategy(generation_mode=mode))  # type: ignore[attr-defined]
    def run(case: schemathesis.Case) -> None:
        sent.append(f"{mode.value} {case.operation.label}")
        case.call_and_validate(
            base_url=base_url, headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS
        )

    run()


@pytest.mark.slow
def test_every_route_survives_openapi_fuzzing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_bundle(Workspace(home).models_dir, "v1")
    env = {"RECSYS_ADMIN_TOKEN": TOKEN, "RECSYS_ACCESS_LOG": "false"}
    with running_server(home, env) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        sent: list[str] = []
        for operation in operations:
            for mode in _modes(operation):
                _fuzz(operation, mode, url, sent)
    labels = {op.label for op in operations}
    assert {"POST /recommend", "POST /admin/reload", "GET /similar/{item_id}"} <= labels
    assert {label.split(" ", 1)[1] for label in sent} == labels
    assert len(sent) >= 1000
    negative = sum(label.startswith("negative") for label in sent)
    print(f"{len(sent)} fuzzed requests ({negative} negative) over {len(labels)} operations")
