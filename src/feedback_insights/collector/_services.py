"""The services' side: AFP §5.1 record forwarding with an ingest key."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from ..core import Problem, SchemaSet, schemas_dir
from ..ingest import dialects
from . import _openapi as openapi
from ._auth import requires_key
from ._collector import Collector
from ._http import error, json_response, read_json

SCHEMAS = SchemaSet(schemas_dir() / "collector")
MAX_RECORDS = 100


def router(collector: Collector) -> APIRouter:
    routes = APIRouter(tags=["services"])
    config = collector.config

    @routes.post("/v1/records", openapi_extra=openapi.json_body(openapi.schema("collector/records_request.schema.json")),
                 responses=openapi.answers({200: ("One result per record", openapi.RECORD_RESULTS)}, (400, 401, 413, 415)),
                 dependencies=[requires_key(config.ingest_keys, "ingest")])
    async def ingest_records(request: Request) -> Response:
        """AFP §5.1: a service forwards 1 to 100 records with its ingest key; each gets
        accepted, duplicate or rejected, with the known issue it belongs to."""
        body, refused = await read_json(request, MAX_RECORDS * (config.max_bytes + 1024))
        if refused:
            return refused
        problems = SCHEMAS.check("records_request.schema.json", body)
        if problems:
            return error(400, "invalid_request", "; ".join(map(str, problems)), [p.as_dict() for p in problems])
        results = []
        for record in body["records"]:
            # AFP records, unless the body inside is plainly another agent dialect.
            module = dialects.detect(record) or "afp"
            problems = dialects.dialect(module).validate(record, max_bytes=config.max_bytes)
            if not problems and not isinstance(record.get("feedback"), dict):
                problems = [Problem("feedback", "is required: a record wraps the submission")]
            if problems:
                results.append({"id": record.get("id"), "status": "rejected", "error": {
                    "code": "invalid_feedback", "message": "; ".join(map(str, problems)),
                    "details": [p.as_dict() for p in problems]}})
                continue
            record_id, created, known = collector.accept(record, module)
            result: dict[str, Any] = {"id": record_id, "status": "accepted" if created else "duplicate"}
            if known:
                result["known_issue"] = known
            results.append(result)
        return json_response({"results": results})

    return routes
