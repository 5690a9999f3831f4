"""The published OpenAPI schema tells the truth: property-based runs of schemathesis.

schemathesis generates requests from `/openapi.json` and runs every check of `--checks all`
(schemathesis.toml beside this file counts 413 and 414 as rejections): no 5xx; a documented
status code, content type and body; no schema-valid request rejected and no schema-violating
one accepted. Each operation is fuzzed with valid input (positive mode) and, where it has query
or body parameters, with input that breaks its schema (negative mode). A short in-process run
over the routes whose schema and validation once disagreed runs with every `make test`; every
route against the real server is slow (`make test-all`, or `pytest -m slow -k fuzz`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from data.workspace import Workspace
from tests.serving.bundles import make_bundle
from tests.serving.server import running_server

CONFIG = SchemathesisConfig.from_path(Path(__file__).with_name("schemathesis.toml"))
CASES_PER_MODE = 120
QUICK_CASES_PER_MODE = 25
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SERVER_ENV = {"RECSYS_ADMIN_TOKEN": TOKEN, "RECSYS_ACCESS_LOG": "false"}
# The operations whose schema and validation disagreed: a whole float as k was refused, a
# query `items=0.0` read as breaking a null branch no query string can send, a 413 uncounted.
FIXED = {"GET /recommend", "POST /recommend", "POST /recommend/batch", "POST /events"}


def _modes(operation: Any) -> tuple[GenerationMode, ...]:
    """Both modes where a query or body parameter can break its schema; else positive only.

    Path parameters (item ids) are any string: nothing to break.
    """
    return MODES if len(operation.query) + len(operation.body) else MODES[:1]


def _fuzz(operation: Any, mode: GenerationMode, cases: int, sent: list[str], **call: Any) -> None:
    """Send `cases` requests of `mode` to one operation, every check on; raises on a failure."""

    @settings(
        max_examples=cases, deadline=None, database=None, derandomize=True,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case) -> None:
        sent.append(f"{mode.value} {case.operation.label}")
        case.call_and_validate(headers=AUTH, **call)

    run()


def _fuzz_all(operations: list[Any], cases: int, **call: Any) -> list[str]:
    """Fuzz each operation in each of its modes; the labels of the requests sent."""
    sent: list[str] = []
    for operation in operations:
        for mode in _modes(operation):
            _fuzz(operation, mode, cases, sent, **call)
    assert {label.split(" ", 1)[1] for label in sent} == {op.label for op in operations}
    return sent


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real server over a planted bundle; a small body limit, so that 413s come up."""
    home = tmp_path_factory.mktemp("fuzz") / "home"
    make_bundle(Workspace(home).models_dir, "v1")
    env = {**SERVER_ENV, "RECSYS_MAX_BODY_BYTES": "20000"}
    with running_server(home, env) as url:
        yield url


@pytest.fixture(scope="module")
def schema(served: str) -> Any:
    return schemathesis.openapi.from_url(f"{served}/openapi.json", config=CONFIG)


def test_the_fixed_routes_survive_a_short_fuzzing_run(served: str, schema: Any) -> None:
    operations = [op.ok() for op in schema.get_all_operations() if op.ok().label in FIXED]
    sent = _fuzz_all(operations, QUICK_CASES_PER_MODE, base_url=served)
    assert sum(label.startswith("negative") for label in sent) >= 50


@pytest.mark.parametrize("path", ["/recommend", "/recommend/batch"])
def test_a_whole_float_is_an_integer_k(served: str, schema: Any, path: str) -> None:
    body: dict[str, Any] = {"items": ["i1"], "k": 758.0}  # JSON Schema: 758.0 is an integer
    case = schema[path]["POST"].Case(body={"requests": [body]} if "batch" in path else body)
    answer = case.call_and_validate(base_url=served, headers=AUTH)
    assert answer.status_code == 200
    items = answer.json()["results"][0]["items"] if "batch" in path else answer.json()["items"]
    assert len(items) == 59  # all but the history's item: the 60 of the bundle


def test_no_query_parameter_is_declared_nullable(served: str) -> None:
    """A query string cannot send null: absent is the default (so `items=0.0` is one id)."""
    declared = [
        (param["name"], json.dumps(param["schema"]))
        for path in httpx.get(f"{served}/openapi.json").json()["paths"].values()
        for operation in path.values()
        for param in operation.get("parameters", [])
    ]
    assert all('"null"' not in text for _, text in declared), declared
    items = dict(declared)["items"]
    assert '"maxItems": 1000' in items and '"type": "array"' in items


def test_an_oversized_body_is_a_documented_413(served: str, schema: Any) -> None:
    events = [{"user_id": "u1", "item_id": "i1", "timestamp": 100}] * 1000  # ~50 kB
    case = schema["/events"]["POST"].Case(body={"events": events})
    answer = case.call_and_validate(base_url=served, headers=AUTH)
    assert answer.status_code == 413  # its code, content type and body checked too
    statuses = CONFIG.projects.default.checks.negative_data_rejection.expected_statuses
    assert {"413", "414"} <= set(statuses)


@pytest.mark.slow
def test_every_route_survives_openapi_fuzzing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_bundle(Workspace(home).models_dir, "v1")
    with running_server(home, SERVER_ENV) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=CONFIG)
        operations = [result.ok() for result in schema.get_all_operations()]
        sent = _fuzz_all(operations, CASES_PER_MODE, base_url=url)
    labels = {op.label for op in operations}
    assert {"POST /recommend", "POST /admin/reload", "GET /similar/{item_id}"} <= labels
    assert len(sent) >= 1000
    negative = sum(label.startswith("negative") for label in sent)
    print(f"{len(sent)} fuzzed requests ({negative} negative) over {len(labels)} operations")
