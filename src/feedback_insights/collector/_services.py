"""The services' side, with an ingest key: AFP §5.1 record forwarding, and deleting a record
(its retries with it) when the service deletes it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from ..core import Problem, SchemaSet, schemas_dir
from ..ingest import dialects
from . import _openapi as openapi
from ._auth import requires_key
from ._collector import Collector
from ._http import PathId, error, invalid, json_response, read_json, too_deep

SCHEMAS = SchemaSet(schemas_dir() / "collector")
MAX_RECORDS = 100


def _batch_problems(body: Any) -> list[Problem]:
    """The batch's own nesting (each record's is its own result), then its schema."""
    shell = {**body, "records": []} if isinstance(body, dict) and isinstance(body.get("records"), list) else body
    return too_deep(shell) or SCHEMAS.check("records_request.schema.json", body)


def _checked(record: dict[str, Any], max_bytes: int) -> tuple[str, list[Problem]]:
    """One record's dialect and what is wrong with it: its nesting before anything walks it,
    then its dialect's validation. AFP, unless the body inside is plainly another dialect."""
    if problems := too_deep(record):
        return "afp", problems
    module = dialects.detect(record) or "afp"
    problems = dialects.dialect(module).validate(record, max_bytes=max_bytes)
    if not problems and not isinstance(record.get("feedback"), dict):
        problems = [Problem("feedback", "is required: a record wraps the submission")]
    return module, problems


def _rejected(record: dict[str, Any], problems: list[Problem]) -> dict[str, Any]:
    record_id = record.get("id")
    failure = {"code": "invalid_feedback", "message": "; ".join(map(str, problems)),
               "details": [p.as_dict() for p in problems]}
    return {"id": record_id if isinstance(record_id, str) else None, "status": "rejected", "error": failure}


def router(collector: Collector) -> APIRouter:
    routes = APIRouter(tags=["services"])
    config = collector.config
    max_body = MAX_RECORDS * (config.max_bytes + 1024)
    ingest_key = requires_key(collector, config.ingest_keys, "ingest")

    results_answer = {200: ("One result per record", openapi.RECORD_RESULTS)}

    @routes.post("/v1/records", responses=openapi.answers(results_answer, (400, 401, 413, 415, 429), max_body),
                 openapi_extra=openapi.json_body(openapi.schema("collector/records_request.schema.json"), max_body),
                 dependencies=[ingest_key])
    async def ingest_records(request: Request) -> Response:
        """AFP §5.1: a service forwards 1 to 100 records with its ingest key; each gets
        accepted, duplicate or rejected, with the known issue it belongs to."""
        body, refused = await read_json(request, max_body)
        if refused:
            return refused
        if problems := _batch_problems(body):
            return invalid("invalid_request", problems)
        results = []
        for record in body["records"]:
            module, problems = _checked(record, config.max_bytes)
            if problems:
                results.append(_rejected(record, problems))
                continue
            record_id, created, known = collector.accept(record, module)
            result: dict[str, Any] = {"id": record_id, "status": "accepted" if created else "duplicate"}
            if known:
                result["known_issue"] = known
            results.append(result)
        return json_response({"results": results})

    @routes.delete("/v1/records/{record_id}", status_code=204, dependencies=[ingest_key],
                   responses=openapi.answers({204: ("Deleted, with its retries", None)}, (400, 401, 404, 429)))
    async def delete_record(record_id: PathId) -> Response:
        """The service deleted a record: it is removed with its retries, nothing of them is left
        in the collector's file, and the pull feed carries a tombstone for each, so the
        pipeline forgets them too."""
        if not collector.delete(record_id):
            return error(404, "not_found", f"No record {record_id}")
        return Response(status_code=204)

    return routes
