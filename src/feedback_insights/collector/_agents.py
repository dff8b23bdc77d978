"""The agents' side over HTTP: discovery (the AFP document and ``/llms.txt``), and feedback in
AFP, the Agent Feedback Spec and MCP SEP-2369. How a report is received is ``_submission``'s,
shared with the MCP tools (``_mcp``)."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request, Response

from ..ingest.dialects import afp
from . import _openapi as openapi
from ._collector import Collector
from ._http import json_response, read_json
from ._llms import llms_txt
from ._submission import submit

FEEDBACK_TYPES = list(afp.TYPE_MAP)
#: 409: the same account's report the pipeline erased (``forget``), sent again: not stored.
AGENT_ERRORS = (400, 401, 409, 413, 415, 429, 503)


def router(collector: Collector) -> APIRouter:
    routes = APIRouter(tags=["agents"])
    config = collector.config

    async def submit_http(request: Request, choice: str, source: str) -> Response:
        """A report POSTed as a body: read as a stream within the byte limit, then the shared path."""
        return await submit(collector, request, partial(read_json, request), choice, source)

    ack = openapi.schema("afp/ack.schema.json")

    @routes.get("/.well-known/agent-feedback", responses=openapi.answers({200: ("Discovery document", openapi.DISCOVERY)}, ()))
    async def discovery(request: Request) -> Response:
        """The AFP discovery document (§2)."""
        return json_response({
            "spec_version": "0.1", "endpoint": str(request.base_url).rstrip("/") + "/feedback",
            "types": FEEDBACK_TYPES, "max_bytes": config.max_bytes, "auth": config.auth,
        })

    # Not in the OpenAPI document: it describes the API in prose for agents, it is not part of it.
    @routes.get("/llms.txt", include_in_schema=False)
    async def llms(request: Request) -> Response:
        """AFP §2.4: the feedback endpoints and MCP tools described for agents (llms.txt)."""
        text = llms_txt(config, str(request.base_url).rstrip("/"), FEEDBACK_TYPES)
        return Response(text, media_type="text/markdown; charset=utf-8")

    accepted = openapi.answers({202: ("Accepted", ack)}, AGENT_ERRORS, config.max_bytes)

    @routes.post("/feedback", status_code=202, responses=accepted,
                 openapi_extra=openapi.json_body(openapi.schema("afp/feedback.schema.json"), config.max_bytes))
    async def feedback(request: Request) -> Response:
        """Submit AFP feedback (§3)."""
        return await submit_http(request, "afp", "http")

    @routes.post("/api/v1/feedback", status_code=202, responses=accepted,
                 openapi_extra=openapi.json_body(openapi.afs_body(), config.max_bytes))
    async def afs_feedback(request: Request) -> Response:
        """Submit an Agent Feedback Spec v1 report (snake_case or camelCase)."""
        return await submit_http(request, "afs", "http")

    sep = {"oneOf": [openapi.schema("sep2369.schema.json"), openapi.schema("sep2369-envelope.schema.json")]}
    mcp_answers = openapi.answers({202: ("Accepted", ack), 200: ("JSON-RPC result", openapi.JSONRPC_RESULT)}, AGENT_ERRORS,
                                  config.max_bytes)
    for status in (400, 409):  # a JSON-RPC envelope is answered in JSON-RPC
        mcp_answers[status]["content"]["application/json"]["schema"] = {"anyOf": [openapi.ERROR, openapi.JSONRPC_ERROR]}

    @routes.post("/api/mcp/feedback", status_code=202, responses=mcp_answers,
                 openapi_extra=openapi.json_body(sep, config.max_bytes))
    async def mcp_feedback(request: Request) -> Response:
        """Submit MCP SEP-2369 feedback, bare (202) or JSON-RPC enveloped (answered in JSON-RPC)."""
        return await submit_http(request, "afs", "mcp")

    return routes
