"""The agents' side: discovery, and feedback in AFP, the Agent Feedback Spec and MCP SEP-2369."""

from __future__ import annotations

import os
import time
from typing import Any

from fastapi import APIRouter, Request, Response

from ..core import Problem
from ..ingest import dialects, is_enveloped
from ..ingest.dialects import afp, sep2369
from . import _openapi as openapi
from ._auth import agent_account
from ._collector import Collector
from ._http import error, json_response, now_iso, read_json

FEEDBACK_TYPES = list(afp.TYPE_MAP)
AGENT_ERRORS = (400, 401, 413, 415, 429, 503)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id() -> str:
    """ULID-shaped ``fb_`` id: time-sortable, like the AFP SDKs'."""
    ms = time.time_ns() // 1_000_000
    head = "".join(_CROCKFORD[(ms >> shift) & 31] for shift in range(45, -1, -5))
    tail = "".join(_CROCKFORD[b & 31] for b in os.urandom(16))
    return f"fb_{head}{tail}"


def _jsonrpc_error(request: dict[str, Any], details: list[dict[str, str]], message: str) -> Response:
    """A JSON-RPC request is answered in JSON-RPC, failures too: -32601 for a method other than
    feedback/submit, -32602 for invalid params; the AFP details ride in ``error.data``."""
    wrong_method = any(d["path"] == "method" for d in details)
    code = -32601 if wrong_method else -32602
    request_id = request.get("id") if isinstance(request.get("id"), str | int) else None
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": {"details": details}}}
    return json_response(body, 400)


def router(collector: Collector) -> APIRouter:
    routes = APIRouter(tags=["agents"])
    config = collector.config

    async def submit(request: Request, choice: str, source: str) -> Response:
        """The agent side, for every dialect: auth, rate limit, body checks, validation, then
        accept. 202 with the acknowledgement (known_issue included when the problem is already
        tracked); a retry (same session_id and content) gets the first report's id."""
        account, refused = agent_account(config, request)
        refused = refused or collector.limited(account, request.client.host if request.client else "unknown")
        if refused:
            return refused
        body, refused = await read_json(request, config.max_bytes)
        if refused:
            return refused
        module = dialects.detect(body, choice)
        if is_enveloped(body):  # id, received_at, service, account are the receiver's to set
            problems = [Problem("feedback", "is a record field: send the submission itself; records go to POST /v1/records")]
        elif module:
            problems = dialects.dialect(module).validate(body, max_bytes=config.max_bytes)
        else:
            problems = dialects.undetected(body)
        if problems:
            details = [p.as_dict() for p in problems]
            message = "; ".join(map(str, problems))
            if isinstance(body, dict) and "jsonrpc" in body:
                return _jsonrpc_error(body, details, message)
            return error(400, "invalid_feedback", message, details)
        assert module is not None  # an undetected body has problems
        envelope = {"id": new_id(), "received_at": now_iso(), "source": source}
        if config.service:
            envelope["service"] = config.service
        if account:
            envelope["account"] = account
        rpc_id = body.get("id") if module == "sep2369" and sep2369.is_jsonrpc(body) else None
        submission = body
        if module == "sep2369":
            # service, account and received_at are for a receiver to attach: never an agent's claim.
            submission = {k: v for k, v in sep2369.params(body).items() if k not in ("service", "account", "received_at")}
        record_id, _, known = collector.accept({**envelope, "feedback": submission}, module)
        ack: dict[str, Any] = {"id": record_id, "status": "accepted", "received_at": envelope["received_at"]}
        if known:
            ack["known_issue"] = known
        if rpc_id is not None:
            return json_response({"jsonrpc": "2.0", "id": rpc_id, "result": {"accepted": True, **ack}})
        return json_response(ack, 202)

    ack = openapi.schema("afp/ack.schema.json")

    @routes.get("/.well-known/agent-feedback", responses=openapi.answers({200: ("Discovery document", openapi.DISCOVERY)}, ()))
    async def discovery(request: Request) -> Response:
        """The AFP discovery document (§2)."""
        return json_response({
            "spec_version": "0.1", "endpoint": str(request.base_url).rstrip("/") + "/feedback",
            "types": FEEDBACK_TYPES, "max_bytes": config.max_bytes, "auth": config.auth,
        })

    @routes.post("/feedback", status_code=202, openapi_extra=openapi.json_body(openapi.schema("afp/feedback.schema.json")),
                 responses=openapi.answers({202: ("Accepted", ack)}, AGENT_ERRORS))
    async def feedback(request: Request) -> Response:
        """Submit AFP feedback (§3)."""
        return await submit(request, "afp", "http")

    @routes.post("/api/v1/feedback", status_code=202, openapi_extra=openapi.json_body(openapi.afs_body()),
                 responses=openapi.answers({202: ("Accepted", ack)}, AGENT_ERRORS))
    async def afs_feedback(request: Request) -> Response:
        """Submit an Agent Feedback Spec v1 report (snake_case or camelCase)."""
        return await submit(request, "afs", "http")

    sep = {"oneOf": [openapi.schema("sep2369.schema.json"), openapi.schema("sep2369-envelope.schema.json")]}
    mcp_answers = openapi.answers({202: ("Accepted", ack), 200: ("JSON-RPC result", openapi.JSONRPC_RESULT)}, AGENT_ERRORS)
    mcp_answers[400]["content"]["application/json"]["schema"] = {"anyOf": [openapi.ERROR, openapi.JSONRPC_ERROR]}

    @routes.post("/api/mcp/feedback", status_code=202, openapi_extra=openapi.json_body(sep), responses=mcp_answers)
    async def mcp_feedback(request: Request) -> Response:
        """Submit MCP SEP-2369 feedback, bare (202) or JSON-RPC enveloped (answered in JSON-RPC)."""
        return await submit(request, "afs", "mcp")

    return routes
