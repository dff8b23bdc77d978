"""A strict fake of the in-session platform's feedback API, served on 127.0.0.1: the routes
and MCP tools of in-session-feedback-capture §§7–8 as the seed's shipped decisions describe them.

* ``GET /v1/feedback?instance_id=&status=&limit=`` → ``{"feedback": [row, …]}``, newest first
  (``ts`` DESC), at most ``limit`` rows (clamped to 1…``max_limit``; no cursor, no offset).
  Owner-scoped like ``errors.ts``: a bearer token that is no owner's is 401; another owner's
  ``instance_id`` is 404 (``requireOwnedInstance``); without one, only the caller's rows.
* ``PATCH /v1/feedback/:id`` ``{status, issue_url?}`` and ``DELETE /v1/feedback/:id``: the
  caller's rows only (else 404); status and issue_url are the only mutable columns, ``updated_at``
  moves; a token without the write scope is 403.
* MCP (Streamable HTTP at ``/mcp``, the official SDK's server): ``list_feedback
  {instance_id?, status?, limit?}`` (read) and ``resolve_feedback {feedback_id, status,
  issue_url?}`` (write: refused without the write scope, as ``requirePermission(…, "write")``),
  each mutation audited. A token that is no owner's is refused by the endpoint (401) before any
  tool runs. Tool errors carry ``{"error", "status"}`` (and ``retry_after`` for 429).
* Rate limits: :meth:`PlatformFake.throttle` answers the next requests 429 with ``Retry-After``.

Rows have the seed's ``agent_feedback`` columns (§4): pointers (trace_id, message_id, session_id,
timeline_seq), snapshots (target_*, prompt_text), context (agentSlug, model, engine, audioKey,
dictation), status and issue_url.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

STATUSES = ("open", "triaged", "filed", "dismissed")
COLUMNS = ("id", "ts", "created_at", "user_id", "instance_id", "author", "surface", "sentiment", "body", "trace_id",
           "message_id", "session_id", "timeline_seq", "target_role", "target_text", "target_at", "prompt_text",
           "context", "status", "issue_url", "updated_at")


@dataclass
class Owner:
    user_id: str
    scopes: frozenset[str]


@dataclass
class Throttle:
    remaining: int
    retry_after: int


class Denied(Exception):
    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


@dataclass
class PlatformFake:
    max_limit: int = 200
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, Owner] = field(default_factory=dict)
    #: instance id → its owner's user id (instances exist apart from their rows).
    instances: dict[str, str] = field(default_factory=dict)
    #: Every mutation: {"via", "tool", "user_id", "feedback_id", "status", "issue_url", "at"}.
    audit: list[dict[str, Any]] = field(default_factory=list)
    #: Every request: (when, via, what, status answered).
    requests: list[tuple[float, str, str, int]] = field(default_factory=list)
    throttled: Throttle | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- set-up -------------------------------------------------------------------------------

    def load_sqlite(self, path: Path) -> None:
        """Every row of an ``agent_feedback`` table (the sample's), ``context`` parsed."""
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        try:
            for row in con.execute("SELECT * FROM agent_feedback"):
                self.add_row(dict(row))
        finally:
            con.close()

    def add_row(self, row: dict[str, Any]) -> None:
        row = {column: row.get(column) for column in COLUMNS}
        if isinstance(row["context"], str):
            row["context"] = orjson.loads(row["context"])
        row["status"] = row["status"] or "open"
        self.rows[row["id"]] = row
        self.instances.setdefault(row["instance_id"], row["user_id"])

    def add_token(self, token: str, user_id: str, scopes: tuple[str, ...] = ("read", "write")) -> None:
        self.tokens[token] = Owner(user_id, frozenset(scopes))

    def owners(self) -> list[str]:
        return sorted({row["user_id"] for row in self.rows.values()})

    def throttle(self, times: int, retry_after: int) -> None:
        """The next ``times`` requests are answered 429 with ``Retry-After: retry_after``."""
        self.throttled = Throttle(times, retry_after)

    # -- what the platform's owner does -------------------------------------------------------

    def set_status(self, feedback_id: str, status: str) -> None:
        self.rows[feedback_id].update(status=status, updated_at=_now())

    def delete(self, feedback_id: str) -> None:
        del self.rows[feedback_id]

    def delete_instance(self, instance_id: str) -> None:
        for key in [k for k, row in self.rows.items() if row["instance_id"] == instance_id]:
            del self.rows[key]
        del self.instances[instance_id]

    # -- the API ------------------------------------------------------------------------------

    def caller(self, authorization: str | None) -> Owner:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or token not in self.tokens:
            raise Denied(401, "Missing Authorization header" if not authorization else "Invalid token")
        return self.tokens[token]

    def spend(self) -> None:
        with self.lock:
            if self.throttled and self.throttled.remaining > 0:
                self.throttled.remaining -= 1
                raise Denied(429, "Too many requests", self.throttled.retry_after)

    def list(self, owner: Owner, instance_id: Any, status: Any, limit: Any) -> list[dict[str, Any]]:
        if status is not None and status not in STATUSES:
            raise Denied(400, "status must be one of: " + ", ".join(STATUSES))
        try:
            count = 50 if limit is None else int(limit)
        except (TypeError, ValueError):
            raise Denied(400, "limit must be an integer") from None
        count = max(1, min(count, self.max_limit))
        if instance_id is not None and self.instances.get(instance_id) != owner.user_id:
            raise Denied(404, "Instance not found")
        rows = [row for row in self.rows.values() if row["user_id"] == owner.user_id
                and (instance_id is None or row["instance_id"] == instance_id)
                and (status is None or row["status"] == status)]
        rows.sort(key=lambda r: (-r["ts"], r["id"]))
        return [dict(row) for row in rows[:count]]

    def resolve(self, owner: Owner, via: str, feedback_id: Any, status: Any, issue_url: Any) -> dict[str, Any]:
        row = self.rows.get(feedback_id) if isinstance(feedback_id, str) else None
        if row is None or row["user_id"] != owner.user_id:
            raise Denied(404, "Feedback not found")
        if "write" not in owner.scopes:
            raise Denied(403, "This token has no write permission (resolve_feedback needs the MCP write scope)")
        if status not in STATUSES or not (issue_url is None or isinstance(issue_url, str)):
            raise Denied(400, "status must be one of: " + ", ".join(STATUSES) + "; issue_url a string")
        row.update(status=status, updated_at=_now(), **({"issue_url": issue_url} if issue_url is not None else {}))
        self.audit.append({"via": via, "tool": "resolve_feedback" if via == "mcp" else "PATCH /v1/feedback/:id",
                           "user_id": owner.user_id, "feedback_id": feedback_id, "status": status,
                           "issue_url": issue_url, "at": _now()})
        return dict(row)

    def remove(self, owner: Owner, feedback_id: str) -> None:
        row = self.rows.get(feedback_id)
        if row is None or row["user_id"] != owner.user_id:
            raise Denied(404, "Feedback not found")
        if "write" not in owner.scopes:
            raise Denied(403, "This token has no write permission")
        del self.rows[feedback_id]
        self.audit.append({"via": "http", "tool": "DELETE /v1/feedback/:id", "user_id": owner.user_id,
                           "feedback_id": feedback_id, "status": None, "issue_url": None, "at": _now()})

    def log(self, via: str, what: str, status: int) -> None:
        with self.lock:
            self.requests.append((time.monotonic(), via, what, status))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _denied(fake: PlatformFake, what: str, denied: Denied) -> Response:
    fake.log("http", what, denied.status)
    headers = {"retry-after": str(denied.retry_after)} if denied.retry_after is not None else None
    return JSONResponse({"error": denied.message}, denied.status, headers=headers)


def _routes(fake: PlatformFake) -> list[Route]:
    async def feedback(request: Request) -> Response:
        what = "GET /v1/feedback"
        try:
            owner = fake.caller(request.headers.get("authorization"))
            fake.spend()
            q = request.query_params
            rows = fake.list(owner, q.get("instance_id"), q.get("status"), q.get("limit"))
        except Denied as denied:
            return _denied(fake, what, denied)
        fake.log("http", what, 200)
        return JSONResponse({"feedback": rows})

    async def one(request: Request) -> Response:
        feedback_id = request.path_params["feedback_id"]
        what = f"{request.method} /v1/feedback/:id"
        try:
            owner = fake.caller(request.headers.get("authorization"))
            fake.spend()
            if request.method == "DELETE":
                fake.remove(owner, feedback_id)
                fake.log("http", what, 204)
                return Response(status_code=204)
            body = orjson.loads(await request.body() or b"{}")
            if not isinstance(body, dict) or set(body) - {"status", "issue_url"}:
                raise Denied(400, "only status and issue_url may change")
            row = fake.resolve(owner, "http", feedback_id, body.get("status"), body.get("issue_url"))
        except Denied as denied:
            return _denied(fake, what, denied)
        fake.log("http", what, 200)
        return JSONResponse(row)

    return [Route("/v1/feedback", feedback, methods=["GET"]),
            Route("/v1/feedback/{feedback_id:path}", one, methods=["PATCH", "DELETE"])]


_LIST_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "instance_id": {"type": "string"}, "status": {"enum": list(STATUSES)}, "limit": {"type": "integer"}}}
_RESOLVE_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["feedback_id", "status"], "properties": {
    "feedback_id": {"type": "string"}, "status": {"enum": list(STATUSES)}, "issue_url": {"type": "string"}}}


def _mcp_server(fake: PlatformFake) -> Server[Any]:
    tools = [
        types.Tool(name="list_feedback", description="The owner's feedback rows, newest first.", input_schema=_LIST_SCHEMA),
        types.Tool(name="resolve_feedback", description="Set a row's status (and issue_url). Needs the write scope.",
                   input_schema=_RESOLVE_SCHEMA),
    ]

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        request = ctx.request
        assert isinstance(request, Request)
        try:
            owner = fake.caller(request.headers.get("authorization"))
            fake.spend()
            if params.name == "list_feedback":
                body: dict[str, Any] = {"feedback": fake.list(owner, arguments.get("instance_id"), arguments.get("status"),
                                                              arguments.get("limit"))}
            elif params.name == "resolve_feedback":
                body = fake.resolve(owner, "mcp", arguments.get("feedback_id"), arguments.get("status"),
                                    arguments.get("issue_url"))
            else:
                raise Denied(404, "Unknown tool")
        except Denied as denied:
            fake.log("mcp", params.name, denied.status)
            error = {"error": denied.message, "status": denied.status}
            if denied.retry_after is not None:
                error["retry_after"] = denied.retry_after
            return types.CallToolResult(content=[types.TextContent(text=orjson.dumps(error).decode())], is_error=True)
        fake.log("mcp", params.name, 200)
        return types.CallToolResult(content=[types.TextContent(text=orjson.dumps(body).decode())], structured_content=body)

    return Server("pags-platform-fake", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)


class _McpEndpoint:
    """``/mcp``: the bearer token checked first (401, as the platform's MCP worker answers),
    then the SDK's stateless session manager."""

    def __init__(self, fake: PlatformFake) -> None:
        self.fake = fake
        self.server = _mcp_server(fake)
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(self.server, stateless=True, json_response=True)
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        try:
            self.fake.caller(headers.get(b"authorization", b"").decode() or None)
        except Denied as denied:
            self.fake.log("mcp", "(endpoint)", denied.status)
            await JSONResponse({"error": denied.message}, denied.status)(scope, receive, send)
            return
        assert self.manager is not None
        await self.manager.handle_request(scope, receive, send)


@dataclass
class RunningPlatform:
    url: str
    fake: PlatformFake

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"


@contextmanager
def running_platform(fake: PlatformFake | None = None) -> Iterator[RunningPlatform]:
    fake = fake or PlatformFake()
    endpoint = _McpEndpoint(fake)
    app = Starlette(routes=[*_routes(fake), Route("/mcp", endpoint=endpoint, methods=["POST"])],
                    lifespan=endpoint.lifespan)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the platform fake did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield RunningPlatform(f"http://127.0.0.1:{port}", fake)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# -- the sample's in-session rows on the platform ------------------------------------------------

SAMPLE_SESSION = Path(__file__).resolve().parents[1] / "data" / "sample" / "session.sqlite"
#: Planted in one owner's rows (their words, the turn they quote, the dictation): it may be found
#: only in the warehouse and the desk.
PHRASE = "zephyr quokka vermilion lantern"


def token_of(user_id: str) -> str:
    return f"pags-token-{user_id}-s3cr3t"


def sample_fake(plant: bool = True) -> PlatformFake:
    """The sample's ``agent_feedback`` rows on a fake, a read-and-write token per owner; with
    ``plant``, :data:`PHRASE` in every row of the owner with the most rows."""
    fake = PlatformFake()
    fake.load_sqlite(SAMPLE_SESSION)
    for user_id in fake.owners():
        fake.add_token(token_of(user_id), user_id)
    if plant:
        for row in fake.rows.values():
            if row["user_id"] == planted_owner(fake):
                row["body"] = f"{row['body']} {PHRASE}"
                row["target_text"] = f"{row['target_text'] or ''} {PHRASE}".strip()
                row["prompt_text"] = f"{row['prompt_text'] or ''} {PHRASE}".strip()
                row["context"] = {**(row["context"] or {}), "dictation": PHRASE}
    return fake


def planted_owner(fake: PlatformFake) -> str:
    users = [row["user_id"] for row in fake.rows.values()]
    return max(sorted(set(users)), key=users.count)


def owner_env(fake: PlatformFake) -> dict[str, str]:
    """Environment variable → token, one per owner (``PAGS_TOKEN_0`` …)."""
    return {f"PAGS_TOKEN_{n}": token_of(user_id) for n, user_id in enumerate(fake.owners())}


def platform_source(running: RunningPlatform, transport: str = "http", **settings: Any) -> dict[str, Any]:
    """A ``[[sources]]`` table for the running fake, as the issue writes it."""
    return {"name": "pags", "kind": "platform", "url": running.url if transport == "http" else running.mcp_url,
            "transport": transport, "service": "pags-console",
            "owners": [{"token_env": name} for name in owner_env(running.fake)], **settings}


def clustered_platform(folder: Path, embedder: Any) -> Path:
    """The planted sample rows ingested from the fake over HTTP, scored, clustered and drafted,
    once per test session in ``folder`` (the session's base temporary folder); copy it."""
    built = folder / "platform.duckdb"
    if built.exists():
        return built
    import os

    from feedback_insights.clusters import cluster_new_records
    from feedback_insights.config import Config
    from feedback_insights.drafts import draft_clusters
    from feedback_insights.ingest import ingest
    from feedback_insights.signals import score_new_records
    from feedback_insights.warehouse import Warehouse

    fake = sample_fake()
    saved = {name: os.environ.get(name) for name in owner_env(fake)}
    os.environ.update(owner_env(fake))
    building = folder / "platform-building.duckdb"
    try:
        with running_platform(fake) as running, Warehouse(building) as warehouse:
            config = Config.model_validate({"warehouse": {"path": str(building)}, "privacy": {"hmac_key": "k" * 32},
                                            "sources": [platform_source(running)]})
            assert ingest(config, warehouse).errors == []
            score_new_records(warehouse)
            cluster_new_records(warehouse, embedder)
            draft_clusters(config, warehouse)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    building.replace(built)
    return built
