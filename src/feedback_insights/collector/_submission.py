"""How an agent's report is received, whichever way it arrives.

The HTTP routes (``POST /feedback``, ``/api/v1/feedback``, ``/api/mcp/feedback``) and the MCP
tools (``submit_feedback``, ``submit_agent_feedback``) all go through :func:`submit`, so they
authenticate, rate limit, bound, check, store and acknowledge alike: one place to get right, and
no way for one door to be laxer than another. Only how the body is read differs (a stream of
bytes, or tool arguments the MCP transport has parsed): the caller passes a :data:`BodyReader`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response

from ..core import Problem
from ..ingest import dialects, is_enveloped
from ..ingest.dialects import sep2369
from ._auth import agent_account
from ._collector import ERASED_MESSAGE, Collector, client_ip
from ._http import error, json_response, now_iso, too_deep

#: ``max_bytes`` → the parsed body, or the refusal to answer with (413, 415, invalid JSON).
BodyReader = Callable[[int], Awaitable[tuple[Any, Response | None]]]

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


async def submit(collector: Collector, request: Request, read: BodyReader, choice: str, source: str,
                 *, rpc: bool = True) -> Response:
    """The agent side, for every dialect and every door: auth, rate limit, body (its byte limit),
    nesting, validation, then accept. 202 with the acknowledgement (known_issue included when the
    problem is already tracked); a retry (same session_id and content) gets the first report's id.

    ``request`` is the HTTP request the report came in (its Bearer credential names the account,
    its address is rate limited); ``choice`` the dialects this door takes; ``source`` the record's
    channel (``http`` or ``mcp``). ``rpc``: a JSON-RPC ``feedback/submit`` envelope is answered in
    JSON-RPC (the HTTP route for SEP-2369); a tool's arguments are never an envelope to answer in
    kind, so there the report inside is acknowledged plainly.
    """
    config = collector.config
    account, unauthorized = agent_account(config, request)
    # A failed authentication counts like a submission (of no account): over the limit,
    # right and wrong keys alike are told to wait, so guessing keys learns nothing.
    refused = collector.limited(account, client_ip(request)) or unauthorized
    if refused:
        return refused
    body, refused = await read(config.max_bytes)
    if refused:
        return refused
    module, problems = _checked(body, choice, config.max_bytes)
    if problems:
        details = [p.as_dict() for p in problems]
        message = "; ".join(map(str, problems))
        if rpc and isinstance(body, dict) and "jsonrpc" in body:
            return _jsonrpc_error(body, details, message)
        return error(400, "invalid_feedback", message, details)
    assert module is not None  # an undetected body has problems
    envelope = {"id": new_id(), "received_at": now_iso(), "source": source}
    if config.service:
        envelope["service"] = config.service
    if account:
        envelope["account"] = account
    answer_id = rpc_id(body) if rpc and module == "sep2369" and sep2369.is_jsonrpc(body) else None
    submission = body
    if module == "sep2369":
        # service, account and received_at are for a receiver to attach: never an agent's claim.
        submission = {k: v for k, v in sep2369.params(body).items() if k not in ("service", "account", "received_at")}
    accepted = await collector.accept({**envelope, "feedback": submission}, module)
    if accepted is None:
        # The pipeline erased this account's same report at its owner's request: not stored again.
        if answer_id is not None:
            failure = {"code": -32000, "message": ERASED_MESSAGE, "data": {"code": "erased"}}
            return json_response({"jsonrpc": "2.0", "id": answer_id, "error": failure}, 409)
        return error(409, "erased", ERASED_MESSAGE)
    record_id, _, known = accepted
    ack: dict[str, Any] = {"id": record_id, "status": "accepted", "received_at": envelope["received_at"]}
    if known:
        ack["known_issue"] = known
    if answer_id is not None:
        return json_response({"jsonrpc": "2.0", "id": answer_id, "result": {"accepted": True, **ack}})
    return json_response(ack, 202)
