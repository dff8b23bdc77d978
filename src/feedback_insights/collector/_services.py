"""The services' side, with an ingest key: AFP §5.1 record forwarding, and deleting a record
(its retries with it) when the service deletes it. The pipeline's key deletes too: ``forget``
reaches the collector's own file that way.

A key deletes only what it may: an ingest key the records it forwarded, the pipeline's key any
record. Another key's record is answered as an unknown id is (404), so that no key learns which
ids the others hold."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request, Response

from ..core import Problem, SchemaSet, schemas_dir
from ..ingest import dialects
from . import _openapi as openapi
from ._auth import requires_key
from ._collector import ERASED_MESSAGE, Collector
from ._http import RECORD_ID_PATTERN, RECORD_ID_RULE, StoredId, error, invalid, json_response, read_json, too_deep
from ._store import Conflict

SCHEMAS = SchemaSet(schemas_dir() / "collector")
MAX_RECORDS = 100
_RECORD_ID = re.compile(RECORD_ID_PATTERN)


def _records_body() -> dict[str, Any]:
    """The request's schema for the OpenAPI document, with the id rule in words: a record that
    breaks it is rejected on its own (AFP §5.1), so it is no rule of the batch's schema."""
    body = openapi.schema("collector/records_request.schema.json")
    records = body["properties"]["records"]
    items = {**records["items"], "description": f"An AFP record (§5.1). Its id must match {RECORD_ID_PATTERN} "
                                                f"({RECORD_ID_RULE}); a record that breaks it is rejected, path id."}
    return {**body, "properties": {**body["properties"], "records": {**records, "items": items}}}


def _batch_problems(body: Any) -> list[Problem]:
    """The batch's own nesting (each record's is its own result), then its schema."""
    shell = {**body, "records": []} if isinstance(body, dict) and isinstance(body.get("records"), list) else body
    return too_deep(shell) or SCHEMAS.check("records_request.schema.json", body)


def _checked(record: dict[str, Any], max_bytes: int) -> tuple[str, list[Problem]]:
    """One record's dialect and what is wrong with it: its nesting before anything walks it,
    then its dialect's validation, and its id, which must be one ``DELETE`` can be sent for as it
    is written. AFP, unless the body inside is plainly another dialect."""
    if problems := too_deep(record):
        return "afp", problems
    module = dialects.detect(record) or "afp"
    problems = dialects.dialect(module).validate(record, max_bytes=max_bytes)
    if not problems and not isinstance(record.get("feedback"), dict):
        problems = [Problem("feedback", "is required: a record wraps the submission")]
    record_id = record.get("id")
    if (isinstance(record_id, str) and not _RECORD_ID.fullmatch(record_id)
            and not any(problem.path == "id" for problem in problems)):
        problems = [*problems, Problem("id", f"must be {RECORD_ID_RULE}")]
    return module, problems


def _rejected(record: dict[str, Any], problems: list[Problem]) -> dict[str, Any]:
    record_id = record.get("id")
    failure = {"code": "invalid_feedback", "message": "; ".join(map(str, problems)),
               "details": [p.as_dict() for p in problems]}
    return {"id": record_id if isinstance(record_id, str) else None, "status": "rejected", "error": failure}


def _erased(record_id: str) -> dict[str, Any]:
    """A record the pipeline erased (``forget``), sent again: rejected, as AFP §5.1 rejects a
    record it will not store, with its own code; nothing of it is written."""
    return {"id": record_id, "status": "rejected", "error": {"code": "erased", "message": ERASED_MESSAGE}}


def _conflict(conflict: Conflict, position: int) -> Response:
    """409 for an id already stored (or earlier in the batch) with other content, naming both
    content hashes: the sender reused an id, which must stop it rather than lose the report."""
    path = f"records.{position}.id"
    message = (f"{conflict.record_id} is already stored with other content (stored content hash "
               f"{conflict.stored_hash}, this record's {conflict.new_hash}); nothing of the batch was stored: "
               "send a different report under a new id")
    detail = {"path": path, "message": message, "stored_hash": conflict.stored_hash, "new_hash": conflict.new_hash}
    return error(409, "conflict", f"{path}: {message}", [detail])


def router(collector: Collector) -> APIRouter:
    routes = APIRouter(tags=["services"])
    config = collector.config
    max_body = MAX_RECORDS * (config.max_bytes + 1024)
    ingest_key = requires_key(collector, config.ingest_keys, "ingest")
    deleting_key = requires_key(collector, [*config.ingest_keys, *config.pipeline_keys], "ingest or pipeline")

    results_answer = {200: ("One result per record", openapi.RECORD_RESULTS)}

    @routes.post("/v1/records", responses=openapi.answers(results_answer, (400, 401, 409, 413, 415, 429), max_body),
                 openapi_extra=openapi.json_body(_records_body(), max_body))
    async def ingest_records(request: Request, key: str = ingest_key) -> Response:
        """AFP §5.1: a service forwards 1 to 100 records with its ingest key; each gets
        accepted, duplicate or rejected, with the known issue it belongs to. The records are
        stored in one transaction, as the key's: an id already stored with other content is a 409
        and nothing of the batch is stored. A record the pipeline's key deleted (an erasure:
        its id, or its account's same content) is rejected with code ``erased`` and not stored."""
        body, refused = await read_json(request, max_body)
        if refused:
            return refused
        if problems := _batch_problems(body):
            return invalid("invalid_request", problems)
        results: dict[int, dict[str, Any]] = {}
        valid: list[tuple[int, dict[str, Any], str]] = []
        for position, record in enumerate(body["records"]):
            module, problems = _checked(record, config.max_bytes)
            if problems:
                results[position] = _rejected(record, problems)
            else:
                valid.append((position, record, module))
        try:
            stored = await collector.accept_batch([(record, module) for _, record, module in valid], owner=key)
        except Conflict as conflict:
            return _conflict(conflict, valid[conflict.position][0])
        for (position, record, _), answer in zip(valid, stored, strict=True):
            if answer is None:
                results[position] = _erased(record["id"])
                continue
            record_id, created, known = answer
            result: dict[str, Any] = {"id": record_id, "status": "accepted" if created else "duplicate"}
            if known:
                result["known_issue"] = known
            results[position] = result
        return json_response({"results": [results[position] for position in sorted(results)]})

    @routes.delete("/v1/records/{record_id:any}", status_code=204,
                   responses=openapi.answers({204: ("Deleted, with its retries", None)}, (400, 401, 404, 429)))
    async def delete_record(record_id: StoredId, key: str = deleting_key) -> Response:
        """The service deleted a record, or the pipeline forgot it: it is removed with its
        retries (an ingest key: those it forwarded itself), nothing of them is left in the
        collector's file, and the pull feed carries a tombstone for each, so the pipeline forgets
        them too. An ingest key reaches only the records it forwarded, the pipeline's key any.
        What the pipeline's key deletes is an erasure: sent again, it is not stored (``erased``)."""
        if not collector.delete(record_id, by=None if key in config.pipeline_keys else key):
            return error(404, "not_found", f"No record {record_id}")
        return Response(status_code=204)

    return routes
