"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

It answers ``POST /v1/chat/completions`` from a queue of scripted replies (text the "model"
writes, an HTTP status, or a hang longer than the client's timeout), then, when the queue is
empty, from ``responder`` (a function of the request body, so prompts can be answered
deterministically whatever order they come in), and keeps every request body, so tests can
check what was sent: the delimiters, the escaping, the token budget.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "llm-test-key"


@dataclass
class LLMFake:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    _replies: deque[tuple[str, Any]] = field(default_factory=deque)
    #: Answers a request once the scripted replies are used up: the assistant's text.
    responder: Callable[[dict[str, Any]], str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, *contents: str) -> None:
        """The next answers' text (the assistant message content), in order."""
        self._replies.extend(("text", c) for c in contents)

    def reply_json(self, *answers: dict[str, Any]) -> None:
        self.reply(*(json.dumps(a) for a in answers))

    def fail(self, status: int, retry_after: int | None = None) -> None:
        self._replies.append(("status", (status, retry_after)))

    def hang(self, seconds: float) -> None:
        self._replies.append(("hang", seconds))

    def _next(self, body: dict[str, Any]) -> tuple[str, Any]:
        with self._lock:
            self.requests.append(body)
            if self._replies:
                return self._replies.popleft()
        if self.responder is not None:
            return "text", self.responder(body)
        return "status", (500, None)


def _handler(fake: LLMFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found"}})
                return
            if (presented := self.headers.get("authorization", "")) != f"Bearer {API_KEY}":
                # OpenAI's answer, which quotes (part of) the key presented in its message.
                self._send(401, {"error": {"message": f"Incorrect API key provided: {presented[7:]}.",
                                           "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})
                return
            kind, value = fake._next(body)
            if kind == "hang":
                time.sleep(value)
                self._send(504, {"error": {"message": "too late"}})
            elif kind == "status":
                status, retry_after = value
                headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
                self._send(status, {"error": {"message": f"scripted {status}"}}, headers)
            else:
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": value}}],
                })

    return Handler


@contextmanager
def running_llm() -> Iterator[LLMFake]:
    fake = LLMFake()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
