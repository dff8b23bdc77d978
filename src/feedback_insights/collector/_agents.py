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
from ._collector import Collector, client_ip
from ._http import error, json_response, now_iso, read_json, too_deep

FEEDBACK_TYPES = list(afp.TYPE_MAP)
AGENT_ERRORS = (400, 401, 413, 415, 429, 503)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id() -> str:
    """ULID-shaped ``fb_`` id: time-sortable, like the AFP SDKs'."""
    ms = time.time_ns() // 1_000_000
    head = "".join(_CROCKFORD[(ms >> shift) & 31] for shift in range(45, -1, -5))
    tail = "".join(_CROCKFORD[b & 31] for b in os.urandom(16))
    return f"fb_{head}{tail}"


def rpc_id(request: dict[str, Any]) -> str | int | None:
    """The request's id when JSON-RPC allows echoing it (a string or an integer; ``true`` and
    ``false`` are Python ints but not JSON-RPC ids), else None."""
    value = request.get("id")
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


def _jsonrpc_error(request: dict[str, Any], details: list[dict[str, str]], message: str) -> Response:
    """A JSON-RPC request is answered in JSON-RPC, failures too: -32601 for a method other than
    feedback/submit, -32602 for invalid params; the AFP details ride in ``error.data``."""
    wrong_method = any(d["path"] == "method" for d in details)
    code = -32601 if wrong_method else -32602
    failure = {"code": code, "message": message, "data": {"details": details}}
    return json_response({"jsonrpc": "2.0", "id": rpc_id(request), "error": failure}, 400)


def _checked(body: Any, choice: str, max_bytes: int) -> tuple[str | None, list[Problem]]:
    """The body's dialect and what is wrong with it: its nesting first (nothing recursive has
    touched it yet), then whether it is a submission at all, then its dialect's validation."""
    if problems := too_deep(body):
        return None, problems
    module = dialects.detect(body, choice)
    if is_enveloped(body):  # id, received_at, service, account are the receiver's to set
        return module, [Problem("feedback", "is a record field: send the submission itself; "
                                            "records go to POST /v1/records")]
    if module:
        return module, dialects.dialect(module).validate(body, max_bytes=max_bytes)
    return None, dialects.undetected(body)


def router(collector: Collector) -> APIRouter:
    routes = APIRouter(tags=["agents"])
    config = collector.config

    async def submit(request: Request, choice: str, source: str) -> Response:
        """The agent side, for every dialect: auth, rate limit, body checks, validation, then
        accept. 202 with the acknowledgement (known_issue included when the problem is already
        tracked); a retry (same session_id and content) gets the first report's id."""
        account, unauthorized = agent_account(config, request)
        # A failed authentication counts like a submission (of no account): over the limit,
        # right and wrong keys alike are told to wait, so guessing keys learns nothing.
        refused = collector.limited(account, client_ip(request)) or unauthorized
        if refused:
            return refused
        body, refused = await read_json(request, config.max_bytes)
        if refused:
            return refused
        module, problems = _checked(body, choice, config.max_bytes)
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
        answer_id = rpc_id(body) if module == "sep2369" and sep2369.is_jsonrpc(body) else None
        submission = body
        if module == "sep2369":
            # service, account and received_at are for a receiver to attach: never an agent's claim.
            submission = {k: v for k, v in sep2369.params(body).items() if k not in ("service", "account", "received_at")}
        record_id, _, known = collector.accept({**envelope, "feedback": submission}, module)
        ack: dict[str, Any] = {"id": record_id, "status": "accepted", "received_at": envelope["received_at"]}
        if known:
            ack["known_issue"] = known
        if answer_id is not None:
            return json_response({"jsonrpc": "2.0", "id": answer_id, "result": {"accepted": True, **ack}})
        return json_response(ack, 202)

    ack = openapi.schema("afp/ack.schema.json")

    @routes.get("/.well-known/agent-feedback", responses=openapi.answers({200: ("Discovery document", openapi.DISCOVERY)}, ()))
    async def discovery(request: Request) -> Response:
        """The AFP discovery document (§2)."""
        return json_response({
            "spec_version": "0.1", "endpoint": str(request.base_url).rstrip("/") + "/feedback",
            "types": FEEDBACK_TYPES, "max_bytes": config.max_bytes, "auth": config.auth,
        })

    accepted = openapi.answers({202: ("Accepted", ack)}, AGENT_ERRORS, config.max_bytes)

    @routes.post("/feedback", status_code=202, responses=accepted,
                 openapi_extra=openapi.json_body(openapi.schema("afp/feedback.schema.json"), config.max_bytes))
    async def feedback(request: Request) -> Response:
        """Submit AFP feedback (§3)."""
        return await submit(request, "afp", "http")

    @routes.post("/api/v1/feedback", status_code=202, responses=accepted,
                 openapi_extra=openapi.json_body(openapi.afs_body(), config.max_bytes))
    async def afs_feedback(request: Request) -> Response:
        """Submit an Agent Feedback Spec v1 report (snake_case or camelCase)."""
        return await submit(request, "afs", "http")

    sep = {"oneOf": [openapi.schema("sep2369.schema.json"), openapi.schema("sep2369-envelope.schema.json")]}
    mcp_answers = openapi.answers({202: ("Accepted", ack), 200: ("JSON-RPC result", openapi.JSONRPC_RESULT)}, AGENT_ERRORS,
                                  config.max_bytes)
    mcp_answers[400]["content"]["application/json"]["schema"] = {"anyOf": [openapi.ERROR, openapi.JSONRPC_ERROR]}

    @routes.post("/api/mcp/feedback", status_code=202, responses=mcp_answers,
                 openapi_extra=openapi.json_body(sep, config.max_bytes))
    async def mcp_feedback(request: Request) -> Response:
        """Submit MCP SEP-2369 feedback, bare (202) or JSON-RPC enveloped (answered in JSON-RPC)."""
        return await submit(request, "afs", "mcp")

    return routes
