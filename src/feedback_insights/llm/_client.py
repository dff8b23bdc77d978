"""A client for any OpenAI-compatible chat-completions endpoint (httpx, no SDK).

Deterministic where the model allows it (temperature 0), bounded: a timeout per call, an output
limit, and a few retries of timeouts, rate limits and 5xx with exponential backoff that honours
Retry-After. A 429 that says the account's quota is used up is not a rate limit: waiting does
not bring credit back, so it is not retried. Anything else is one :class:`LLMError`; the
caller falls back (the template draft, the embedding-only clustering) and records why. It sits
below every stage so that drafting and clustering share it.

The output limit is sent as ``max_completion_tokens``, OpenAI's name for it (its reasoning
models refuse the older ``max_tokens``). An endpoint that refuses a parameter by name (a 400
whose error names it: an older server that knows only ``max_tokens``, a reasoning model that
takes no temperature but its default) is asked once more without it, and this client keeps
that for its later calls: a setting nobody has to find. An answer cut off at the limit
(``finish_reason: "length"``), withheld by a content filter, or refused by the model is an
:class:`UnusableAnswer`: never used as if it were complete.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Self

import httpx

from ..config import LLMConfig
from ..core import GaveUp, with_retries


class LLMError(RuntimeError):
    """The endpoint refused, failed, or answered something that is not a completion."""


class UnusableAnswer(LLMError):
    """The endpoint answered, but not with a whole answer (cut off, filtered, refused): asked the
    same way again, it would answer the same."""


#: The names an endpoint may know the output limit by, ours first.
_LIMIT_NAMES = ("max_completion_tokens", "max_tokens")


class ChatClient:
    def __init__(self, config: LLMConfig, *, backoff: float = 1.0, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self.backoff = backoff
        key = config.key()
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/"), timeout=config.timeout, headers=headers, transport=transport
        )
        #: What this endpoint refused by name and is no longer sent; the output limit's name.
        self._dropped: set[str] = set()
        self._limit_name = _LIMIT_NAMES[0]
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, messages: list[dict[str, str]], schema: tuple[str, dict[str, Any]] | None = None) -> str:
        """The assistant's text for ``messages``. With ``schema`` (a name and a JSON Schema) the
        request asks for an answer in that schema (``response_format`` ``json_schema``, strict, as
        OpenAI's API takes it); the caller still validates it: not every endpoint enforces it.
        ``json_mode = false`` sends no ``response_format`` at all, for endpoints that refuse one."""
        response = self._post(self._body(messages, schema))
        while response.status_code == 400 and self._adapted(response):
            response = self._post(self._body(messages, schema))
        if response.status_code >= 400:
            raise LLMError(f"the LLM endpoint refused the request ({response.status_code}){_described(response)}")
        return self._content(response)

    def _body(self, messages: list[dict[str, str]], schema: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.config.model, "messages": messages, "temperature": 0,
                                self._limit_name: self.config.max_output_tokens}
        if schema is not None and self.config.json_mode:
            name, json_schema = schema
            body["response_format"] = {
                "type": "json_schema", "json_schema": {"name": name, "schema": json_schema, "strict": True},
            }
        elif self.config.json_mode:
            body["response_format"] = {"type": "json_object"}
        return {key: value for key, value in body.items() if key not in self._dropped}

    def _adapted(self, response: httpx.Response) -> bool:
        """Whether a 400 refused a parameter we can do without (the temperature) or send under
        its other name (the output limit), each once; if so, later requests are sent so."""
        refused = _refused_parameter(response)
        with self._lock:
            if refused == "temperature" and refused not in self._dropped:
                self._dropped.add(refused)
                return True
            if refused == self._limit_name == _LIMIT_NAMES[0]:
                self._limit_name = _LIMIT_NAMES[1]
                return True
        return False

    def _content(self, response: httpx.Response) -> str:
        try:
            choice = response.json()["choices"][0]
            message, finish = choice["message"], choice.get("finish_reason")
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"the LLM endpoint answered without a completion{_described(response)}") from None
        if isinstance(message, dict) and message.get("refusal"):
            # Its explanation is the model's free text (it may quote the prompt): not kept.
            raise UnusableAnswer("the model refused to answer (its message carries a refusal)")
        if finish == "length":
            raise UnusableAnswer(f"the LLM's answer was cut off at the token limit (finish_reason length, "
                                 f"max_output_tokens {self.config.max_output_tokens}): not used")
        if finish == "content_filter":
            raise UnusableAnswer("the endpoint's content filter withheld the answer (finish_reason content_filter)")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise LLMError("the LLM endpoint answered a completion without text content")
        return content

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        def send() -> httpx.Response:
            response = self._http.post("/chat/completions", json=body)
            if response.status_code == 429 and "insufficient_quota" in _said(response).values():
                raise LLMError(f"the LLM endpoint refused the request (429){_described(response)}: "
                               "the account's quota is used up (not retried)")
            return response

        try:
            response = with_retries(send, self.config.retries, self.backoff, 30.0)
        except GaveUp as failed:
            if failed.response is None:
                raise LLMError(f"the LLM endpoint failed after {failed.tries} tries: {type(failed.error).__name__}") from None
            raise LLMError(f"the LLM endpoint answered {failed.response.status_code} after {failed.tries} tries") from None
        except httpx.HTTPError as exc:  # e.g. a body that cannot be decoded
            raise LLMError(f"the LLM endpoint's answer could not be read: {type(exc).__name__}: {exc}") from None
        return response


_IDENTIFIER = re.compile(r"[A-Za-z0-9_.\[\]-]{1,64}")
#: OpenAI's words for a parameter it does not know; the name is compared with ours, never kept.
_UNRECOGNISED = re.compile(r"Unrecognized request argument supplied: ([A-Za-z0-9_]{1,64})")


def _error(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-style error body (empty when there is none)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return {}
    return error if isinstance(error, dict) else {}


def _said(response: httpx.Response) -> dict[str, str]:
    """The ``type``, ``code`` and ``param`` of an error body that are plain identifiers."""
    error = _error(response)
    return {key: value for key in ("type", "code", "param")
            if isinstance(value := error.get(key), str) and _IDENTIFIER.fullmatch(value)}


def _refused_parameter(response: httpx.Response) -> str | None:
    """The request parameter a 400 names as unknown or unsupported, if it names one."""
    said = _said(response)
    if said.get("code") in ("unsupported_parameter", "unsupported_value") and "param" in said:
        return said["param"]
    message = _error(response).get("message")
    found = _UNRECOGNISED.fullmatch(message) if isinstance(message, str) else None
    return found.group(1) if found else None


def _described(response: httpx.Response) -> str:
    """What an endpoint's answer says about itself that is safe to keep: the ``type``, ``code``
    and ``param`` of an OpenAI-style error object when they are plain identifiers. Never the
    body's free text: endpoints echo the prompt (report text) or part of the key in it, and
    this message is logged and stored (``cluster_llm_calls.error``, the drafts' call log)."""
    said = _said(response)
    return f": {', '.join(f'{key} {value}' for key, value in said.items())}" if said else ""
