"""The collector's HTTP API (FastAPI): AFP's push side, Agent Feedback Spec and SEP-2369
compatibility, and the pull and known-issue endpoints the pipeline uses.

Every accepted report is scrubbed and its account pseudonymised before it is stored: the
collector never keeps a secret an agent pasted. Keys are compared by their SHA-256. Each
request is logged as one JSON line with no feedback text in it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import dialects
from ..config import CollectorConfig
from ..dialects import Origin
from ..envelope import is_enveloped
from ..problems import Problem
from ..processing import content_hash, payload
from ..pseudonymise import Pseudonymiser
from ..resources import schemas_dir
from ..schema_compiler import SchemaSet
from ..scrub import Redactor
from . import openapi
from .matching import KnownIssues
from .store import Store

LINK = '</feedback>; rel="agent-feedback"'
FEEDBACK_TYPES = list(dialects.afp.TYPE_MAP)
log = logging.getLogger("feedback_insights.collector")
_SCHEMAS = SchemaSet(schemas_dir() / "collector")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def hash_key(key: str) -> str:
    """How a key is written in the configuration and compared: never the key itself."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def new_id() -> str:
    """ULID-shaped ``fb_`` id: time-sortable, like the AFP SDKs'."""
    ms = time.time_ns() // 1_000_000
    head = "".join(_CROCKFORD[(ms >> shift) & 31] for shift in range(45, -1, -5))
    tail = "".join(_CROCKFORD[b & 31] for b in os.urandom(16))
    return f"fb_{head}{tail}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def error(status: int, code: str, message: str, details: list[dict[str, str]] | None = None,
          headers: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return Response(orjson.dumps({"error": body}), status, headers=headers, media_type="application/json")


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type="application/json")


class RateLimiter:
    """Fixed one-minute windows per key (an account or an IP)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._windows: dict[str, list[float]] = {}

    def wait(self, key: str, now: float) -> int:
        """Seconds until ``key`` may send again; 0 when it may now."""
        if self.per_minute <= 0:
            return 0
        window = self._windows.get(key)
        if window is None or window[1] <= now:
            if len(self._windows) > 100_000:  # forget the windows that have ended, not everyone's
                self._windows = {k: w for k, w in self._windows.items() if w[1] > now}
            self._windows[key] = [1, now + 60]
            return 0
        window[0] += 1
        return math.ceil(window[1] - now) if window[0] > self.per_minute else 0


class LogAndLink:
    """ASGI middleware: one JSON log line per request (no body, so no feedback text), and the
    AFP §2.3 ``Link`` header on every 4xx and 5xx so an agent learns where feedback goes.
    Plain ASGI rather than ``@app.middleware``, whose per-request task halves throughput."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 0

        async def send_with_link(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if status >= 400:
                    message["headers"] = [*message.get("headers", []), (b"link", LINK.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_link)
        except Exception:
            log.exception("request failed")
            if status == 0:  # nothing sent yet: answer as AFP says, retry once later
                failure = error(503, "unavailable", "Feedback could not be stored. Retry once later.",
                                headers={"retry-after": "5"})
                await failure(scope, receive, send_with_link)
        client = scope.get("client")
        log.info(orjson.dumps({  # no body, no query: nothing an agent wrote
            "method": scope["method"], "path": scope["path"], "status": status,
            "ms": round((time.perf_counter() - started) * 1000, 2), "ip": client[0] if client else None,
        }).decode())


class Collector:
    """What the routes share: configuration, the store, the known issues, the limiters."""

    def __init__(self, config: CollectorConfig, pseudonymise: Pseudonymiser, store: Store) -> None:
        self.config = config
        self.pseudonymise = pseudonymise
        self.store = store
        self.known = KnownIssues(store.known_issues())
        self.per_account = RateLimiter(config.rate_limit_per_account)
        self.per_ip = RateLimiter(config.rate_limit_per_ip)

    def bearer(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return token.strip() or None if scheme.lower() == "bearer" else None

    def has_role(self, request: Request, keys: list[str]) -> bool:
        token = self.bearer(request)
        return token is not None and hash_key(token) in keys

    def account(self, request: Request) -> tuple[str | None, Response | None]:
        """The agent's account from its own API credential, per the auth mode."""
        if self.config.auth == "none":
            return None, None
        token = self.bearer(request)
        if token is None:
            if self.config.auth == "required":
                return None, error(401, "unauthorized", "Authenticate with the same credentials as the rest of the API")
            return None, None
        account = self.config.api_keys.get(hash_key(token))
        if account is None and self.config.auth == "required":
            return None, error(401, "unauthorized", "Unknown API key")
        # In optional mode an unknown key is anonymous: made-up keys must not count as customers.
        return account, None

    def limited(self, account: str | None, ip: str) -> Response | None:
        now = time.monotonic()
        wait = max(self.per_account.wait(account, now) if account else 0, self.per_ip.wait(ip, now))
        if wait:
            return error(429, "rate_limited", "Too many feedback submissions", headers={"retry-after": str(wait)})
        return None

    def accept(self, envelope: dict[str, Any], module: str) -> tuple[str, bool, dict[str, Any] | None]:
        """Scrub, store and match one report in the collector envelope: its id (the first
        report's, for a retry), whether it was new, and the known issue it belongs to."""
        body = payload(module, envelope)
        session_id = body.get("session_id") or body.get("sessionId") if isinstance(body, dict) else None
        dedupe = None
        if session_id:
            dedupe = content_hash([envelope.get("service"), envelope.get("account"), session_id, body])
        scrubbed = Redactor(self.pseudonymise).value(envelope)
        origin = Origin("collector", scrubbed["received_at"], service=scrubbed.get("service"))
        normalise = dialects.MODULES[module].normalise
        canonical = normalise(scrubbed, origin)  # before storing: nothing is kept that cannot be read
        record_id, created = self.store.add(scrubbed, dedupe)
        if record_id != scrubbed["id"]:  # a retry: it is the first report that known issues list
            canonical = normalise({**scrubbed, "id": record_id}, origin)
        return record_id, created, self.known.match(canonical)


def _jsonrpc_error(request: dict[str, Any], details: list[dict[str, str]], message: str) -> Response:
    """A JSON-RPC request is answered in JSON-RPC, failures too: -32601 for a method other than
    feedback/submit, -32602 for invalid params; the AFP details ride in ``error.data``."""
    wrong_method = any(d["path"] == "method" for d in details)
    code = -32601 if wrong_method else -32602
    request_id = request.get("id") if isinstance(request.get("id"), str | int) else None
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": {"details": details}}}
    return json_response(body, 400)


def _cursor(seq: int) -> str:
    """Opaque to consumers; a commit sequence number underneath."""
    return f"c{seq}"


def _seq(cursor: str | None) -> int:
    return int(cursor[1:]) if cursor else 0


def create_app(collector: Collector) -> FastAPI:
    app = FastAPI(
        title="feedback-insights collector",
        summary="Agent feedback in (AFP, Agent Feedback Spec v1, SEP-2369), records and known issues out.",
        version="0.1.0",
    )
    config = collector.config

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        """Query and path mistakes in the AFP error shape, like body mistakes."""
        details = [{"path": ".".join(str(p) for p in e["loc"][1:]), "message": e["msg"]} for e in exc.errors()]
        return error(400, "invalid_request", "; ".join(f"{d['path']}: {d['message']}" for d in details), details)

    app.add_middleware(LogAndLink)

    async def read_json(request: Request, max_bytes: int = config.max_bytes) -> tuple[Any, Response | None]:
        content_type = request.headers.get("content-type", "")
        if "json" not in content_type.lower():
            return None, error(415, "unsupported_media_type", "Content-Type must be application/json")
        too_large = error(413, "payload_too_large", f"The body is limited to {max_bytes} bytes")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            return None, too_large
        raw = bytearray()
        async for chunk in request.stream():  # never holds more than the limit in memory
            raw += chunk
            if len(raw) > max_bytes:
                return None, too_large
        try:
            return orjson.loads(raw), None
        except orjson.JSONDecodeError:
            return None, error(400, "invalid_json", "Body is not valid JSON")

    async def submit(request: Request, choice: str, source: str) -> Response:
        """The agent side, for every dialect: auth, rate limit, body checks, validation, then
        accept. 202 with the acknowledgement (known_issue included when the problem is already
        tracked); a retry (same session_id and content) gets the first report's id."""
        account, refused = collector.account(request)
        refused = refused or collector.limited(account, request.client.host if request.client else "unknown")
        if refused:
            return refused
        body, refused = await read_json(request)
        if refused:
            return refused
        module = dialects.detect(body, choice)
        if is_enveloped(body):  # id, received_at, service, account are the receiver's to set
            problems = [Problem("feedback", "is a record field: send the submission itself; records go to POST /v1/records")]
        elif module:
            problems = dialects.MODULES[module].validate(body, max_bytes=config.max_bytes)
        else:
            problems = dialects.undetected(body)
        if problems:
            details = [p.as_dict() for p in problems]
            message = "; ".join(map(str, problems))
            if isinstance(body, dict) and "jsonrpc" in body:
                return _jsonrpc_error(body, details, message)
            return error(400, "invalid_feedback", message, details)
        envelope = {"id": new_id(), "received_at": now_iso(), "source": source}
        if config.service:
            envelope["service"] = config.service
        if account:
            envelope["account"] = account
        rpc_id = body.get("id") if module == "sep2369" and dialects.sep2369.is_jsonrpc(body) else None
        submission = body
        if module == "sep2369":
            # service, account and received_at are for a receiver to attach: never an agent's claim.
            submission = {k: v for k, v in dialects.sep2369.params(body).items() if k not in ("service", "account", "received_at")}
        record_id, _, known = collector.accept({**envelope, "feedback": submission}, module)
        ack = {"id": record_id, "status": "accepted", "received_at": envelope["received_at"]}
        if known:
            ack["known_issue"] = known
        if rpc_id is not None:
            return json_response({"jsonrpc": "2.0", "id": rpc_id, "result": {"accepted": True, **ack}})
        return json_response(ack, 202)

    ack = openapi.schema("afp/ack.schema.json")
    agent_errors = (400, 401, 413, 415, 429, 503)

    @app.get("/.well-known/agent-feedback", tags=["agents"], responses=openapi.answers({200: ("Discovery document", openapi.DISCOVERY)}, ()))
    async def discovery(request: Request) -> Response:
        """The AFP discovery document (§2)."""
        return json_response({
            "spec_version": "0.1", "endpoint": str(request.base_url).rstrip("/") + "/feedback",
            "types": FEEDBACK_TYPES, "max_bytes": config.max_bytes, "auth": config.auth,
        })

    @app.post("/feedback", status_code=202, tags=["agents"], openapi_extra=openapi.json_body(openapi.schema("afp/feedback.schema.json")),
              responses=openapi.answers({202: ("Accepted", ack)}, agent_errors))
    async def feedback(request: Request) -> Response:
        """Submit AFP feedback (§3)."""
        return await submit(request, "afp", "http")

    @app.post("/api/v1/feedback", status_code=202, tags=["agents"], openapi_extra=openapi.json_body(openapi.afs_body()),
              responses=openapi.answers({202: ("Accepted", ack)}, agent_errors))
    async def afs_feedback(request: Request) -> Response:
        """Submit an Agent Feedback Spec v1 report (snake_case or camelCase)."""
        return await submit(request, "afs", "http")

    sep = {"oneOf": [openapi.schema("sep2369.schema.json"), openapi.schema("sep2369-envelope.schema.json")]}

    mcp_answers = openapi.answers({202: ("Accepted", ack), 200: ("JSON-RPC result", openapi.JSONRPC_RESULT)}, agent_errors)
    mcp_answers[400]["content"]["application/json"]["schema"] = {"anyOf": [openapi.ERROR, openapi.JSONRPC_ERROR]}

    @app.post("/api/mcp/feedback", status_code=202, tags=["agents"], openapi_extra=openapi.json_body(sep),
              responses=mcp_answers)
    async def mcp_feedback(request: Request) -> Response:
        """Submit MCP SEP-2369 feedback, bare (202) or JSON-RPC enveloped (answered in JSON-RPC)."""
        return await submit(request, "afs", "mcp")

    @app.post("/v1/records", tags=["services"], openapi_extra=openapi.json_body(openapi.schema("collector/records_request.schema.json")),
              responses=openapi.answers({200: ("One result per record", openapi.RECORD_RESULTS)}, (400, 401, 413, 415)))
    async def ingest_records(request: Request) -> Response:
        """AFP §5.1: a service forwards 1 to 100 records with its ingest key; each gets
        accepted, duplicate or rejected, with the known issue it belongs to."""
        if not collector.has_role(request, config.ingest_keys):
            return error(401, "unauthorized", "A valid ingest key is required")
        body, refused = await read_json(request, 100 * (config.max_bytes + 1024))
        if refused:
            return refused
        problems = _SCHEMAS.check("records_request.schema.json", body)
        if problems:
            return error(400, "invalid_request", "; ".join(map(str, problems)), [p.as_dict() for p in problems])
        results = []
        for record in body["records"]:
            # AFP records, unless the body inside is plainly another agent dialect.
            module = dialects.detect(record) or "afp"
            problems = dialects.MODULES[module].validate(record, max_bytes=config.max_bytes)
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

    @app.get("/v1/records", tags=["pipeline"],
             responses=openapi.answers({200: ("A page", openapi.schema("collector/records_page.schema.json"))}, (400, 401)))
    async def pull(
        request: Request,
        after: Annotated[str | None, Query(pattern=r"^c[0-9]{1,18}$", description="next_cursor of the last page")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 500,
    ) -> Response:
        """Records in commit order after a cursor (see schemas/collector/records_page.schema.json)."""
        if not collector.has_role(request, config.pipeline_keys):
            return error(401, "unauthorized", "A valid pipeline key is required")
        records, last = collector.store.page(_seq(after), limit)
        return json_response({"records": records, "next_cursor": _cursor(last), "has_more": collector.store.has_more(last)})

    known_issue = openapi.schema("collector/known_issue.schema.json")

    @app.put("/v1/known-issues/{issue_id}", tags=["pipeline"], openapi_extra=openapi.json_body(known_issue),
             responses=openapi.answers({200: ("Replaced", known_issue), 201: ("Created", known_issue)}, (400, 401, 413, 415)))
    async def put_known_issue(issue_id: str, request: Request) -> Response:
        """Create or replace a known issue and how to recognise it."""
        if not collector.has_role(request, config.pipeline_keys):
            return error(401, "unauthorized", "A valid pipeline key is required")
        body, refused = await read_json(request, 10 * 1024 * 1024)
        if refused:
            return refused
        problems = _SCHEMAS.check("known_issue.schema.json", body)
        if not problems and body["id"] != issue_id:
            problems = [Problem("id", f"must equal the id in the path ({issue_id})")]
        if problems:
            return error(400, "invalid_request", "; ".join(map(str, problems)), [p.as_dict() for p in problems])
        match = body.pop("match", {})
        created = collector.store.put_known_issue(body, match, now_iso())
        collector.known = KnownIssues(collector.store.known_issues())
        return json_response({**body, "match": match}, 201 if created else 200)

    listing = {"type": "object", "required": ["known_issues"], "properties": {"known_issues": {"type": "array", "items": known_issue}}}

    @app.get("/v1/known-issues", tags=["pipeline"], responses=openapi.answers({200: ("All known issues", listing)}, (401,)))
    async def list_known_issues(request: Request) -> Response:
        if not collector.has_role(request, config.pipeline_keys):
            return error(401, "unauthorized", "A valid pipeline key is required")
        return json_response({"known_issues": [{**issue, "match": match} for issue, match in collector.store.known_issues()]})

    @app.delete("/v1/known-issues/{issue_id}", status_code=204, tags=["pipeline"],
                responses=openapi.answers({204: ("Deleted", None)}, (401, 404)))
    async def delete_known_issue(issue_id: str, request: Request) -> Response:
        if not collector.has_role(request, config.pipeline_keys):
            return error(401, "unauthorized", "A valid pipeline key is required")
        if not collector.store.delete_known_issue(issue_id):
            return error(404, "not_found", f"No known issue {issue_id}")
        collector.known = KnownIssues(collector.store.known_issues())
        return Response(status_code=204)

    return app
