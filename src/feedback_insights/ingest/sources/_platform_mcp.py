"""The platform's feedback tools over MCP, for one owner: ``list_feedback`` and
``resolve_feedback``, through the official ``mcp`` SDK client (Streamable HTTP).

The owner's token is the Bearer credential of every HTTP request the transport makes. A tool
answers its rows (``{"feedback": [...]}``) or a tool error whose JSON names an HTTP-like
``status`` (403 no write scope, 404 not found, 429 with ``retry_after``); a token that is no
owner's is refused by the endpoint itself (401) before any tool runs. Each call is one short
session: the source is read in a few calls per owner, and nothing is held open between them.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from ...core import retry_after
from ._platform_api import NotFound, PlatformError, Refused, listing

#: Seconds a tool's ``retry_after`` is honoured up to, as the HTTP client caps Retry-After.
CAP = 60.0


class McpFeedbackApi:
    def __init__(self, url: str, token: str, variable: str, *, retries: int = 4, backoff: float = 0.5) -> None:
        self.url = url
        self.variable = variable
        self.retries, self.backoff = retries, backoff
        self._token = token

    def close(self) -> None:
        """Nothing is held open between calls."""

    def list(self, status: str | None, instance_id: str | None, limit: int) -> list[dict[str, Any]]:
        arguments = listing(status, instance_id, limit)
        answer = self._call("list_feedback", arguments)
        rows = answer.get("feedback")
        if not isinstance(rows, list):
            raise PlatformError(f"{self.url}: list_feedback for ${self.variable} did not answer {{\"feedback\": [...]}}")
        return rows

    def resolve(self, feedback_id: str, status: str, issue_url: str | None) -> dict[str, Any]:
        arguments: dict[str, Any] = {"feedback_id": feedback_id, "status": status}
        if issue_url is not None:
            arguments["issue_url"] = issue_url
        return self._call("resolve_feedback", arguments)

    def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        what = f"{tool} for ${self.variable}"
        for attempt in range(self.retries + 1):
            statuses: list[int] = []
            try:
                error, answer = _run(self.url, self._token, tool, arguments, statuses)
            except Exception as exc:  # the transport's failure: named by its type, never its text
                status = next((s for s in statuses if s in (401, 403)), None)
                if status is not None:
                    raise Refused(f"{self.url} refused {what} ({status}): the token is not an owner's") from None
                if attempt == self.retries:
                    raise PlatformError(f"{self.url} is unreachable ({what}): {type(exc).__name__}") from None
                time.sleep(self.backoff * 2**attempt)
                continue
            if not error:
                return answer
            status = answer.get("status")
            if status == 429 or (isinstance(status, int) and status >= 500):
                if attempt == self.retries:
                    raise PlatformError(f"{self.url} answered {status} to {what}; gave up after {attempt + 1} tries")
                wait = retry_after(str(answer.get("retry_after")), CAP)
                time.sleep(wait if wait is not None else self.backoff * 2**attempt)
                continue
            if status in (401, 403):
                raise Refused(f"{self.url} refused {what} ({status}): the token may not do this (no write scope)")
            if status == 404:
                raise NotFound(f"{self.url}: {what}: not found")
            raise PlatformError(f"{self.url}: {what} failed ({status or 'a tool error'})")
        raise AssertionError("unreachable")


def _run(url: str, token: str, tool: str, arguments: dict[str, Any], statuses: list[int]) -> tuple[bool, dict[str, Any]]:
    """One session: initialise, call ``tool``, return (is it an error, its JSON object). The
    HTTP status of every answer is appended to ``statuses``: the SDK reports a refused request
    as a bare server error, and a 401 must be told from an outage."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async def main() -> tuple[bool, dict[str, Any]]:
        async with (
            _recording(create_mcp_http_client(headers={"authorization": f"Bearer {token}"}), statuses) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(tool, arguments)
        return result.is_error, _json_of(result)

    return asyncio.run(main())


def _json_of(result: Any) -> dict[str, Any]:
    """The result's JSON object: its structured content, else its first text block."""
    if isinstance(result.structured_content, dict):
        return result.structured_content
    for block in result.content:
        text = getattr(block, "text", None)
        if text is not None:
            try:
                parsed = orjson.loads(text)
            except orjson.JSONDecodeError:
                return {}
            return parsed if isinstance(parsed, dict) else {}
    return {}


def _recording(client: Any, statuses: list[int]) -> Any:
    """``client`` with a response hook that notes each answer's status."""

    async def note(response: Any) -> None:
        statuses.append(response.status_code)

    client.event_hooks = {**client.event_hooks, "response": [*client.event_hooks.get("response", []), note]}
    return client
