"""A client for any OpenAI-compatible chat-completions endpoint (httpx, no SDK).

Deterministic (temperature 0), bounded: a timeout per call and a few retries of timeouts, 429
and 5xx with exponential backoff that honours Retry-After. Anything else is one
:class:`LLMError`; the caller falls back (the template draft, the embedding-only clustering)
and records why. It sits below every stage so that drafting and clustering share it.
"""

from __future__ import annotations

import re
from typing import Any, Self

import httpx

from ..config import LLMConfig
from ..core import GaveUp, with_retries


class LLMError(RuntimeError):
    """The endpoint refused, failed, or answered something that is not a completion."""


class ChatClient:
    def __init__(self, config: LLMConfig, *, backoff: float = 1.0, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self.backoff = backoff
        key = config.key()
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/"), timeout=config.timeout, headers=headers, transport=transport
        )

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
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.config.max_output_tokens,
        }
        if schema is not None and self.config.json_mode:
            name, json_schema = schema
            body["response_format"] = {
                "type": "json_schema", "json_schema": {"name": name, "schema": json_schema, "strict": True},
            }
        elif self.config.json_mode:
            body["response_format"] = {"type": "json_object"}
        response = self._post(body)
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"the LLM endpoint answered without a completion{_described(response)}") from None
        if not isinstance(content, str):
            raise LLMError("the LLM endpoint answered a completion without text content")
        return content

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            response = with_retries(
                lambda: self._http.post("/chat/completions", json=body), self.config.retries, self.backoff, 30.0
            )
        except GaveUp as failed:
            if failed.response is None:
                raise LLMError(f"the LLM endpoint failed after {failed.tries} tries: {type(failed.error).__name__}") from None
            raise LLMError(f"the LLM endpoint answered {failed.response.status_code} after {failed.tries} tries") from None
        except httpx.HTTPError as exc:  # e.g. a body that cannot be decoded
            raise LLMError(f"the LLM endpoint's answer could not be read: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise LLMError(f"the LLM endpoint refused the request ({response.status_code}){_described(response)}")
        return response


_IDENTIFIER = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _described(response: httpx.Response) -> str:
    """What an endpoint's answer says about itself that is safe to keep: the ``type`` and
    ``code`` of an OpenAI-style error object when they are plain identifiers. Never the body's
    free text: endpoints echo the prompt (report text) or part of the key in it, and this
    message is logged and stored (``cluster_llm_calls.error``, the drafts' call log)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    said = [f"{key} {value}" for key in ("type", "code") if isinstance(value := error.get(key), str)
            and _IDENTIFIER.fullmatch(value)]
    return f": {', '.join(said)}" if said else ""
