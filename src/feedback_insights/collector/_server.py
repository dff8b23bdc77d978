"""How the collector is served: the bounded protocol of :mod:`feedback_insights.core.serving`
(deadlines for the head and the body, a head size cap, a connection cap fitted to the descriptor
limit), with the limits of ``[collector]``. Its own answers (408, 431, 503, and uvicorn's 400
for bytes that are not HTTP) are in the AFP error shape with the ``Link`` header, like every
other error of the collector.
"""

from __future__ import annotations

from typing import Any

import orjson
import uvicorn

from ..config import CollectorConfig
from ..core.serving import BoundedProtocol, bounded, fit_connections
from ._middleware import LINK

__all__ = ["CollectorProtocol", "bounded_protocol", "fit_connections", "server_config"]


class CollectorProtocol(BoundedProtocol):
    """The bounded protocol, answering in the AFP error shape."""

    def answer(self, status: int, reason: str, code: str, message: str, *headers: tuple[str, str]) -> bytes:
        body = orjson.dumps({"error": {"code": code, "message": message}})
        lines = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(body)}",
                 f"link: {LINK}", "connection: close", *(f"{name}: {value}" for name, value in headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def bounded_protocol(settings: CollectorConfig) -> type[BoundedProtocol]:
    """``CollectorProtocol`` with the limits of ``[collector]``."""
    return bounded(CollectorProtocol, "BoundedCollectorProtocol", settings.header_timeout, settings.body_timeout,
                   settings.max_connections)


def server_config(app: Any, settings: CollectorConfig, host: str, port: int) -> uvicorn.Config:
    """uvicorn as the collector runs it: the bounded protocol, the keep-alive timeout of
    ``[collector]``, no websockets (no route takes one), and no access log (the middleware
    writes one line per request, with no path an agent chose). The lifespan is required, not
    "auto": the MCP endpoint's session manager runs in it, and a server whose startup failed
    must not come up answering every MCP call with a fault."""
    return uvicorn.Config(app, host=host, port=port, http=bounded_protocol(settings), ws="none", lifespan="on",
                          timeout_keep_alive=settings.keep_alive_timeout, log_level="warning", access_log=False)
