"""One JSON log line per request, and AFP's ``Link`` header on every error."""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Any

import orjson
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._http import unavailable

LINK = '</feedback>; rel="agent-feedback"'
#: What the log says for a path no route matches: the path itself is the agent's text.
UNMATCHED = "(unmatched)"
log = logging.getLogger("feedback_insights.collector")


def route_template(scope: Scope) -> str:
    """The route a request went to, as declared (``/v1/known-issues/{issue_id}``): a raw path may
    hold anything an agent typed, a secret included."""
    route = scope.get("route")
    if route is None:  # Starlette's own routes (/docs, /openapi.json) do not record themselves
        app = scope.get("app")
        routes = getattr(getattr(app, "router", None), "routes", ())
        route = next((r for r in routes if r.matches(scope)[0] is not Match.NONE), None)
    return getattr(route, "path_format", None) or UNMATCHED


def where(trace: TracebackType | None) -> str:
    """``module:line in function`` of the innermost frame: enough to find a fault, and free of
    what a traceback's text or an exception's message may quote from the request."""
    if trace is None:
        return "unknown"
    while trace.tb_next is not None:
        trace = trace.tb_next
    frame = trace.tb_frame
    return f"{frame.f_globals.get('__name__', '?')}:{trace.tb_lineno} in {frame.f_code.co_name}"


class LogAndLink:
    """ASGI middleware: one JSON log line per request (no body, no query, no raw path, so nothing
    an agent wrote), and the AFP §2.3 ``Link`` header on every 4xx and 5xx so an agent learns
    where feedback goes. An unexpected exception is a server fault: 503 with Retry-After (AFP:
    retry once later), and the line says which exception and where, without a traceback.
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

        fault: Exception | None = None
        try:
            await self.app(scope, receive, send_with_link)
        except Exception as exc:
            fault = exc
            if status == 0:  # nothing sent yet: answer as AFP says, retry once later
                await unavailable()(scope, receive, send_with_link)
        client = scope.get("client")
        line: dict[str, Any] = {
            "method": scope["method"], "path": route_template(scope), "status": status,
            "ms": round((time.perf_counter() - started) * 1000, 2), "ip": client[0] if client else None,
        }
        if fault is None:
            log.info(orjson.dumps(line).decode())
        else:
            line.update(error=type(fault).__name__, where=where(fault.__traceback__))
            log.error(orjson.dumps(line).decode())
