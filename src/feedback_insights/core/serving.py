"""How the project's HTTP servers (the collector, the review desk) are served: uvicorn's
httptools protocol, plus the bounds on slow clients that uvicorn does not have. Imported on its
own (not by :mod:`feedback_insights.core`), since it loads uvicorn.

uvicorn times out only an idle kept-alive connection, after a response. A connection that never
finishes its request line and headers, or trickles them a byte at a time, or stops half-way
through its body, is held for ever; headers may grow without limit; and connections are accepted
until the process runs out of descriptors (``limit_concurrency`` answers 503 only once the headers
are in, so it bounds nothing a slow client does). ``BoundedProtocol`` adds, per connection:

- the request line and headers must arrive within ``header_timeout`` seconds of connecting (or of
  the first byte of the next request on a kept-alive connection): trickling bytes does not extend
  it. Else 408 and closed.
- they may take at most ``MAX_HEAD_BYTES``: else 431 and closed.
- the body must arrive within ``body_timeout`` seconds of the headers: else 408 and closed.
- at most ``max_connections`` are open: one more closes the connection that has waited longest
  with no request in progress (headers unfinished, or idle between requests), so slow clients
  cannot starve real ones; when every connection is busy, the new one is answered 503 with
  Retry-After and closed.

These answers, and uvicorn's 400 for bytes that are not HTTP, are written straight to the
socket by :meth:`BoundedProtocol.answer` (plain text; a server overrides it to answer in its
own shape): no application runs for a request that never arrived.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import time
from typing import Any, ClassVar, Literal

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Request line and headers, in bytes: real requests send well under 8 KiB.
MAX_HEAD_BYTES = 64 * 1024
#: Descriptors kept back from ``max_connections`` for the database, its log, the listening socket.
RESERVED_DESCRIPTORS = 64
#: Seconds a client told "too many connections" is asked to wait.
RETRY_AFTER = 5

#: head: reading a request line and headers · body: reading a body · busy: a request in progress ·
#: idle: between requests on a kept-alive connection (uvicorn's keep-alive timer, or ours after an
#: early answer) · closed.
Phase = Literal["head", "body", "busy", "idle", "closed"]


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines, a head size cap and a connection cap (see the
    module docstring). The limits are class attributes, set by :func:`bounded`."""

    header_timeout: ClassVar[float]
    body_timeout: ClassVar[float]
    max_connections: ClassVar[int]

    _phase: Phase = "head"
    _since = 0.0  # when the connection began to wait (head or idle): who waited longest goes first
    _head_bytes = 0
    _timer: asyncio.TimerHandle | None = None

    def answer(self, status: int, reason: str, code: str, message: str, *headers: tuple[str, str]) -> bytes:
        """A whole HTTP/1.1 response with ``Connection: close``: ``message`` as plain text.
        ``code`` names the failure for servers whose errors carry one."""
        body = f"{message}\n".encode()
        lines = [f"HTTP/1.1 {status} {reason}", "content-type: text/plain; charset=utf-8",
                 f"content-length: {len(body)}", "x-content-type-options: nosniff", "cache-control: no-store",
                 "connection: close", *(f"{name}: {value}" for name, value in headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait_for_head()
        if len(self.connections) > self.max_connections and self._open() > self.max_connections:
            if not self._evict_longest_waiting():
                self._close_with(self.answer(503, "Service Unavailable", "unavailable",
                                             "Too many connections. Retry once later.",
                                             ("retry-after", str(RETRY_AFTER))))

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = "closed"
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase == "idle":  # the next request on a kept-alive connection begins
            self._wait_for_head()
        reading_head = self._phase == "head"
        super().data_received(data)
        if reading_head and self._phase == "head":  # every byte of data was request line or headers
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._close_with(self.answer(431, "Request Header Fields Too Large", "headers_too_large",
                                             f"The request line and headers are limited to {MAX_HEAD_BYTES} bytes"))

    def on_headers_complete(self) -> None:
        self._disarm()
        self._head_bytes = 0
        super().on_headers_complete()
        if self.pipeline:  # queued behind the request in progress, with reading paused
            self._phase = "busy"
        else:
            self._wait_for_body()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        if self._phase == "body":
            self._disarm()
            self._phase = "busy"
            if self.cycle.response_complete:
                # Answered before its body was in (401, 413 …), and uvicorn's keep-alive timer,
                # armed at that answer, was cancelled by the body's bytes: idle, timed here.
                self._phase, self._since = "idle", time.monotonic()
                self._arm(self.timeout_keep_alive)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # starts a queued request, or uvicorn's keep-alive timer
        if self.transport.is_closing() or (self._phase == "body" and self.cycle.more_body):
            return  # closing, or answered early while the body still arrives: its deadline holds
        if not self.cycle.response_complete:  # a queued request started
            if self.cycle.more_body:
                self._wait_for_body()
            return
        self._phase, self._since = "idle", time.monotonic()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not HTTP, in this server's shape like every other error."""
        self._close_with(self.answer(400, "Bad Request", "invalid_http", msg))

    # -- deadlines --------------------------------------------------------------------------

    def _wait_for_head(self) -> None:
        self._phase, self._since, self._head_bytes = "head", time.monotonic(), 0
        self._arm(self.header_timeout)

    def _wait_for_body(self) -> None:
        self._phase = "body"
        self._arm(self.body_timeout)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self._phase == "idle":  # no request to answer
            self._phase = "closed"
            self.transport.close()
            return
        if self._phase == "body":
            if self.cycle.response_started:  # answered already: only the rest of the body is late
                self._phase = "closed"
                self.transport.close()
                return
            self.cycle.disconnected = True  # the application still waiting for the body answers no one
        self._close_with(self._too_slow())

    def _too_slow(self) -> bytes:
        return self.answer(408, "Request Timeout", "request_timeout", "The request did not arrive in time")

    # -- the connection cap -----------------------------------------------------------------

    def _open(self) -> int:
        return sum(1 for c in self.connections if not c.transport.is_closing())

    def _evict_longest_waiting(self) -> bool:
        """Close the connection that has waited longest with no request in progress; False
        when every other connection is busy."""
        waiting = [c for c in self.connections if isinstance(c, BoundedProtocol) and c is not self
                   and c._phase in ("head", "idle") and not c.transport.is_closing()]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c._since)
        if oldest._phase == "idle":
            oldest._phase = "closed"
            oldest.transport.close()
        else:
            oldest._close_with(oldest._too_slow())
        return True

    def _close_with(self, answer: bytes) -> None:
        self._phase = "closed"
        self._disarm()
        self.transport.write(answer)
        self.transport.close()


def bounded(base: type[BoundedProtocol], name: str, header_timeout: float, body_timeout: float,
            max_connections: int) -> type[BoundedProtocol]:
    """``base`` (:class:`BoundedProtocol` or a subclass answering in its own shape) with these
    limits, as the class uvicorn's ``http`` setting takes."""
    limits: dict[str, Any] = {"header_timeout": header_timeout, "body_timeout": body_timeout,
                              "max_connections": max_connections}
    return type(name, (base,), limits)


def fit_connections(wanted: int) -> int:
    """How many connections the process can hold open: the soft descriptor limit is raised
    towards the hard one when ``wanted`` needs it, else the cap is lowered, so that the
    database and the listening socket always find a descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_DESCRIPTORS))


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (``[::1]`` too), bound before a server announces its
    address, so that a port in use is its caller's one line, not uvicorn's error after the
    success line. Raises :class:`OSError` as ``bind`` does."""
    address = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
        sock.bind((address, port))
        sock.listen()
    except OSError:
        sock.close()
        raise
    return sock
