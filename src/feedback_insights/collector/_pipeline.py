"""The pipeline's side: records pulled in commit order, known issues put back (pipeline key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from ..core import Problem
from . import _openapi as openapi
from ._auth import requires_key
from ._collector import Collector
from ._http import PathId as IssueId
from ._http import error, invalid, json_response, now_iso, read_json, too_deep
from ._services import SCHEMAS

MAX_KNOWN_ISSUE_BYTES = 10 * 1024 * 1024


def _cursor(seq: int) -> str:
    """Opaque to consumers; a commit sequence number underneath."""
    return f"c{seq}"


def _seq(cursor: str | None) -> int:
    return int(cursor[1:]) if cursor else 0


def router(collector: Collector) -> APIRouter:
    key = requires_key(collector, collector.config.pipeline_keys, "pipeline")
    routes = APIRouter(tags=["pipeline"], dependencies=[key])
    store = collector.store

    page = openapi.schema("collector/records_page.schema.json")

    @routes.get("/v1/records", responses=openapi.answers({200: ("A page", page)}, (400, 401, 429)))
    async def pull(
        after: Annotated[str | None, Query(pattern=r"^c[0-9]{1,18}$", description="next_cursor of the last page")] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="records and tombstones at most")] = 500,
    ) -> Response:
        """Records and tombstones in commit order after a cursor (see
        schemas/collector/records_page.schema.json)."""
        found = store.page(_seq(after), limit)
        return json_response({"records": found.records, "deleted": found.deleted,
                              "next_cursor": _cursor(found.last), "has_more": found.has_more})

    known_issue = openapi.schema("collector/known_issue.schema.json")

    @routes.put("/v1/known-issues/{issue_id}", openapi_extra=openapi.json_body(known_issue, MAX_KNOWN_ISSUE_BYTES),
                responses=openapi.answers({200: ("Replaced", known_issue), 201: ("Created", known_issue)},
                                          (400, 401, 413, 415, 429), MAX_KNOWN_ISSUE_BYTES))
    async def put_known_issue(issue_id: IssueId, request: Request) -> Response:
        """Create or replace a known issue and how to recognise it. With a meaning, answered once
        the collector's model is loaded, so the next submission is matched by it."""
        body, refused = await read_json(request, MAX_KNOWN_ISSUE_BYTES)
        if refused:
            return refused
        problems = too_deep(body) or SCHEMAS.check("known_issue.schema.json", body)
        if not problems and body["id"] != issue_id:
            problems = [Problem("id", f"must equal the id in the path ({issue_id})")]
        if problems:
            return invalid("invalid_request", problems)
        match = body.pop("match", {})
        created = store.put_known_issue(body, match, now_iso())
        collector.reload_known_issues()
        await collector.known_issues_ready()
        return json_response({**body, "match": match}, 201 if created else 200)

    listing = {"type": "object", "required": ["known_issues"], "properties": {"known_issues": {"type": "array", "items": known_issue}}}

    @routes.get("/v1/known-issues", responses=openapi.answers({200: ("All known issues", listing)}, (401, 429)))
    async def list_known_issues() -> Response:
        return json_response({"known_issues": [{**issue, "match": match} for issue, match in store.known_issues()]})

    @routes.delete("/v1/known-issues/{issue_id}", status_code=204,
                   responses=openapi.answers({204: ("Deleted", None)}, (400, 401, 404, 429)))
    async def delete_known_issue(issue_id: IssueId) -> Response:
        if not store.delete_known_issue(issue_id):
            return error(404, "not_found", f"No known issue {issue_id}")
        collector.reload_known_issues()
        return Response(status_code=204)

    return routes
