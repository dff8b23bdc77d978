"""schemathesis against the collector's own OpenAPI document, over real HTTP: no 5xx, and every
answer (status, content type, body) is one the document describes."""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from .collector_server import INGEST_KEY, PIPELINE_KEY, running_collector

#: What the collector promises: no server error, and only documented statuses, content types
#: and bodies. (Not "every schema-valid body is accepted": the 16 KiB limit counts bytes, which
#: no JSON Schema can say.)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def test_the_collector_keeps_to_its_openapi_document(tmp_path: Path) -> None:
    with running_collector(tmp_path, rate_limit_per_account=0, rate_limit_per_ip=0) as server:
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == 10
        for operation in operations:
            check_operation(operation)


def check_operation(operation: schemathesis.APIOperation) -> None:
    ingest = operation.path.startswith("/v1/records") and operation.method.upper() in ("POST", "DELETE")
    headers = {"authorization": f"Bearer {INGEST_KEY if ingest else PIPELINE_KEY}"}

    @given(case=operation.as_strategy())
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    check()
