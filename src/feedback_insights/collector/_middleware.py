"""One JSON log line per request, and AFP's ``Link`` header on every error."""

from __future__ import annotations

import logging
import time

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._http import error

LINK = '</feedback>; rel="agent-feedback"'
log = logging.getLogger("feedback_insights.collector")


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
