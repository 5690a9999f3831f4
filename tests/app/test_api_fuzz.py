"""OpenAPI fuzzing of the real server (slow: `make test-all`, or `pytest -m slow -k fuzz`).

schemathesis generates requests from `/openapi.json` for every route (the admin routes with
the token set) and checks each answer: no 5xx, a documented status code and content type,
and a body that matches the documented schema. CASES_PER_ROUTE on each of the 6 operations
that take input gives over 1,000 requests (hypothesis stops early where nothing varies).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from data.workspace import Workspace
from tests.serving.bundles import make_bundle
from tests.serving.server import running_server

CASES_PER_ROUTE = 200
TOKEN = "fuzz-token"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _fuzz(operation: object, base_url: str, sent: list[str]) -> None:
    """Run CASES_PER_ROUTE generated requests against one operation; raises on a failure."""

    @settings(
        max_examples=CASES_PER_ROUTE, deadline=None, database=None, derandomize=True,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(case=operation.as_strategy())  # type: ignore[attr-defined]
    def run(case: schemathesis.Case) -> None:
        sent.append(case.operation.label)
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
            _fuzz(operation, url, sent)
    labels = {op.label for op in operations}
    assert {"POST /recommend", "POST /admin/reload", "GET /similar/{item_id}"} <= labels
    assert set(sent) == labels
    assert len(sent) >= 1000
    print(f"{len(sent)} fuzzed requests over {len(labels)} operations")
