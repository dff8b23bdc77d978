"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests, as strict as
OpenAI's Chat Completions API where our client meets it.

It answers ``POST /v1/chat/completions`` from a queue of scripted replies (text the "model"
writes, a refusal, an HTTP status, a used-up quota, a rate limit, or a hang longer than the
client's timeout), then, when the queue is empty, from ``responder`` (a function of the request
body, so prompts can be answered deterministically whatever order they come in), and keeps every
request body, so tests can check what was sent: the delimiters, the escaping, the token budget.

Like the real API it refuses, with its error bodies (``{"error": {"message", "type", "param",
"code"}}``), a parameter it does not know ("Unrecognized request argument supplied: …"), a body
without ``model`` or ``messages``, and, as a reasoning model (``reasoning = True``: o-series,
gpt-5), ``max_tokens`` (it takes ``max_completion_tokens``) and any ``temperature`` but 1. An
answer longer than the token limit sent is cut there, with ``finish_reason: "length"``; tokens
are counted as characters / 4.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "llm-test-key"

#: The request body's keys the Chat Completions API knows (its create parameters).
PARAMETERS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
    "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def error(message: str, type_: str = "invalid_request_error", param: str | None = None,
          code: str | None = None) -> dict[str, Any]:
    """An error body as OpenAI's API writes it."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def refused_parameters(body: dict[str, Any], known: frozenset[str], reasoning: bool) -> dict[str, Any] | None:
    """The 400 body the API answers to ``body``, or None when it takes it."""
    unknown = sorted(set(body) - known)
    if unknown:
        return error(f"Unrecognized request argument supplied: {unknown[0]}")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return error("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return error("Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return error(f"Invalid value for 'messages[{i}].role'.", param=f"messages[{i}].role", code="invalid_value")
    if reasoning and "max_tokens" in body:
        return error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                     "Use 'max_completion_tokens' instead.", param="max_tokens", code="unsupported_parameter")
    if reasoning and "temperature" in body and body["temperature"] != 1:
        return error(f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                     "Only the default (1) value is supported.", param="temperature", code="unsupported_value")
    return None


@dataclass
class LLMFake:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    _replies: deque[tuple[str, Any]] = field(default_factory=deque)
    #: Answers a request once the scripted replies are used up: the assistant's text.
    responder: Callable[[dict[str, Any]], str] | None = None
    #: As a reasoning model: ``max_tokens`` and a temperature other than 1 are refused.
    reasoning: bool = False
    #: The parameters it knows (an older OpenAI-compatible server may know fewer).
    known: frozenset[str] = PARAMETERS
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, *contents: str) -> None:
        """The next answers' text (the assistant message content), in order."""
        self._replies.extend(("text", c) for c in contents)

    def reply_json(self, *answers: dict[str, Any]) -> None:
        self.reply(*(json.dumps(a) for a in answers))

    def refuse(self, explanation: str = "I'm sorry, I can't help with that.") -> None:
        """The next answer a refusal: no content, the model's explanation in ``refusal``."""
        self._replies.append(("refusal", explanation))

    def fail(self, status: int, retry_after: int | None = None) -> None:
        self._replies.append(("status", (status, retry_after)))

    def quota(self) -> None:
        """The next answer OpenAI's 429 for an account whose quota (credit) is used up."""
        self._replies.append(("quota", None))

    def rate_limit(self, retry_after: int) -> None:
        """The next answer OpenAI's 429 for too many requests a minute, with ``retry-after``."""
        self._replies.append(("rate", retry_after))

    def hang(self, seconds: float) -> None:
        self._replies.append(("hang", seconds))

    def _next(self, body: dict[str, Any]) -> tuple[str, Any]:
        with self._lock:
            self.requests.append(body)
            if refused := refused_parameters(body, self.known, self.reasoning):
                return "error", (400, refused)
            if self._replies:
                return self._replies.popleft()
        if self.responder is not None:
            return "text", self.responder(body)
        return "status", (500, None)


def _completion(body: dict[str, Any], content: str | None, refusal: str | None = None) -> dict[str, Any]:
    """A chat.completion object; ``content`` cut at the request's token limit (finish_reason length)."""
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    finish = "stop"
    if content is not None and isinstance(limit, int) and math.ceil(len(content) / 4) > limit:
        content, finish = content[: 4 * limit], "length"
    tokens = math.ceil(len(content or refusal or "") / 4)
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                     "message": {"role": "assistant", "content": content, "refusal": refusal, "annotations": []}}],
        "usage": {"prompt_tokens": sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4,
                  "completion_tokens": tokens, "total_tokens": tokens},
    }


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
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path != "/v1/chat/completions":
                self._send(404, error(f"Invalid URL (POST {self.path})"))
                return
            if (presented := self.headers.get("authorization", "")) != f"Bearer {API_KEY}":
                # OpenAI's answer, which quotes (part of) the key presented in its message.
                self._send(401, error(f"Incorrect API key provided: {presented[7:]}.", code="invalid_api_key"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                self._send(400, error("We could not parse the JSON body of your request."))
                return
            kind, value = fake._next(body)
            if kind == "hang":
                time.sleep(value)
                self._send(504, error("too late", "server_error"))
            elif kind == "error":
                self._send(*value)
            elif kind == "status":
                status, retry_after = value
                headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
                self._send(status, error(f"scripted {status}", "server_error" if status >= 500 else "invalid_request_error"),
                           headers)
            elif kind == "quota":
                self._send(429, error("You exceeded your current quota, please check your plan and billing details.",
                                      "insufficient_quota", code="insufficient_quota"))
            elif kind == "rate":
                self._send(429, error(f"Rate limit reached for {body['model']} on requests per min (RPM): Limit 3, "
                                      f"Used 3, Requested 1. Please try again in {value}s.", "requests",
                                      code="rate_limit_exceeded"), {"retry-after": str(value)})
            elif kind == "refusal":
                self._send(200, _completion(body, None, value))
            else:
                self._send(200, _completion(body, value))

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
