"""The collector as an MCP server: AFP §7's ``submit_feedback`` and the Agent Feedback Spec's
``submit_agent_feedback``, over Streamable HTTP at ``/mcp``.

``/mcp`` is a route of the collector's own app, so it is served by the same uvicorn server and
``_server.py`` protocol (header, body and keep-alive timeouts, the connection cap) and logged by
the same middleware as every other route. A tool call goes through the same
:func:`~._submission.submit` as ``POST /feedback``: the MCP request's ``Authorization: Bearer``
header is the agent's credential, and the rate limits, byte and nesting limits, validation,
scrubbing, duplicate handling, storage and known-issue matching are the HTTP routes' own. The
tool's result is what the route would have answered: the ack JSON (202), or the AFP error object
as a tool error (``isError``) so the agent's model reads what to fix.

The transport is stateless and answers in JSON: every request is one POST with one answer. The
collector keeps no MCP session state and holds no stream open (``GET /mcp`` is 405), so a client
can pin nothing in memory, and the slow-client bounds apply to ``/mcp`` as to any POST.

A request whose ``id`` is not a string or an integer, or a request method sent without an id, is
refused before the SDK sees it (:func:`not_a_request`): the SDK reads either as a notification and
answers ``202`` with nothing done, so a ``tools/call`` would look accepted and be lost.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pydantic_core
from fastapi import Request, Response
from mcp import MCPError, types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from ._collector import Collector
from ._http import error, json_response, too_deep, too_large, unavailable
from ._middleware import log, where
from ._submission import BodyReader, rpc_id, submit
from ._tools import INSTRUCTIONS, TOOLS

MCP_PATH = "/mcp"
VERSION = "0.1.0"


def transport_limit(max_bytes: int) -> int:
    """What a whole ``/mcp`` request may hold: more than its arguments' ``max_bytes`` (JSON-RPC
    framing, ``_meta``, and a client's escaping: ``\\u00e9`` is six bytes for two). The byte
    limit proper is on the arguments (:func:`tool_arguments`); this keeps any request from being
    read into memory without end."""
    return 6 * max_bytes + 64 * 1024


def tool_arguments(arguments: dict[str, Any] | None) -> BodyReader:
    """A tool's arguments read as an HTTP body would be: the JSON an HTTP client would have
    POSTed (compact UTF-8) is held to the same byte limit and parsed by the same parser (so an
    integer beyond 64 bits becomes a float, as in ``read_json``); the route and the tool see the
    same body. A body nested too deep is passed on as it is, for the shared nesting check to name
    the path before anything walks it."""

    async def read(max_bytes: int) -> tuple[Any, Response | None]:
        body: Any = {} if arguments is None else arguments
        if too_deep(body):
            return body, None
        try:
            raw = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        except ValueError:  # NaN or Infinity, or a lone surrogate: nothing an HTTP body could carry
            return None, error(400, "invalid_json", "The arguments are not valid JSON")
        if len(raw) > max_bytes:
            return None, too_large(max_bytes)
        return orjson.loads(raw), None

    return read


def tool_result(response: Response) -> types.CallToolResult:
    """The route's answer as a tool result: the ack (text, and as structured content), or the
    AFP error object as a tool error, with ``retry_after`` where the route would send
    ``Retry-After``."""
    body = orjson.loads(bytes(response.body))
    if response.status_code < 400:
        return types.CallToolResult(content=[types.TextContent(text=orjson.dumps(body).decode())],
                                    structured_content=body)
    if wait := response.headers.get("retry-after"):
        body["retry_after"] = int(wait)
    return types.CallToolResult(content=[types.TextContent(text=orjson.dumps(body).decode())], is_error=True)


def not_a_request(message: Any) -> str | None:
    """Why a JSON-RPC message is neither a request the server can answer nor a notification, or
    None. JSON-RPC 2.0: a request's id is a string or an integer (MCP: never null), and a message
    without one is a notification, which no answer reaches; MCP's notifications are the
    ``notifications/…`` methods, so any other method without an id is a request the client can
    never hear back from. Responses, batches and malformed messages are the SDK's to refuse."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    if "id" not in message:
        method = message["method"]
        if isinstance(method, str) and method.startswith("notifications/"):
            return None
        # The method is the client's text: not echoed.
        return ("Invalid Request: a message without an id is a notification, and only notifications/ methods are "
                "notifications; send this request with an id (a string or an integer)")
    if rpc_id(message) is None:
        return "Invalid Request: id must be a string or an integer (MCP: never null)"
    return None


async def read_all(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole body, and the messages it came in, to hand on unchanged. Bounded by the
    ``RequestBodyLimitMiddleware`` in front (and the protocol's body timeout)."""
    messages, body = [], bytearray()
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    return bytes(body), messages


def feedback_server(collector: Collector) -> Server[Any]:
    """The MCP server: its tools, and each call through the shared submission path."""
    listing = types.ListToolsResult(tools=[tool.listing() for tool in TOOLS.values()])

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:  # the name is the client's text: not echoed
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool; this server has {', '.join(TOOLS)}")
        request = ctx.request
        if not isinstance(request, Request):  # only the HTTP transport carries a credential and an address
            raise MCPError(types.INTERNAL_ERROR, "Feedback tools are served over HTTP only")
        try:
            response = await submit(collector, request, tool_arguments(params.arguments), tool.choice, "mcp", rpc=False)
        except Exception as exc:
            # A genuine fault, as the middleware logs one on the HTTP routes: one line with the
            # exception's type and where, no traceback (its text may quote the report).
            line = {"method": "POST", "path": MCP_PATH, "tool": tool.name, "error": type(exc).__name__,
                    "where": where(exc.__traceback__)}
            log.error(orjson.dumps(line).decode())
            response = unavailable()
        return tool_result(response)

    return Server("feedback-insights-collector", version=VERSION, title="Agent feedback", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  get_tool_input_schema=lambda name: TOOLS[name].input_schema if name in TOOLS else None)


def quiet_sdk_log() -> None:
    """The collector logs one JSON line per request; the SDK's INFO lines (``Terminating session:
    None`` on every stateless request) would interleave plain text with them. Its warnings and
    errors still pass, and a level an operator set for the ``mcp`` logger is kept."""
    sdk = logging.getLogger("mcp")
    if sdk.level == logging.NOTSET:
        sdk.setLevel(logging.WARNING)


class McpEndpoint:
    """``/mcp`` as an ASGI app, and the lifespan its session manager runs in.

    The SDK's session manager can run only once and only inside a task group that outlives the
    requests, so it is made and run in the app's lifespan (a new one each time the app starts:
    a test may start the same app twice) and requests go to whichever runs now.
    """

    def __init__(self, collector: Collector) -> None:
        quiet_sdk_log()
        self.server = feedback_server(collector)
        self.max_request_bytes = transport_limit(collector.config.max_bytes)
        self._manager: StreamableHTTPSessionManager | None = None
        # The SDK's own bounded reader, so a body is never held whole beyond the transport limit.
        self._checked = RequestBodyLimitMiddleware(self._requests_only, self.max_request_bytes)
        # POST only: a stateless server has no stream for GET to open and no session to DELETE.
        self.route = Route(MCP_PATH, endpoint=self, methods=["POST"], include_in_schema=False)

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(self.server, stateless=True, json_response=True,
                                               max_request_body_size=self.max_request_bytes)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None:  # served outside the lifespan: a fault of the deployment (503)
            raise RuntimeError("the MCP session manager runs in the app's lifespan")
        if any(name == b"origin" for name, _ in scope["headers"]):
            # The MCP transport's rule against DNS rebinding: agents' HTTP clients send no Origin,
            # and the collector serves no CORS, so only a browser page would send one.
            await error(403, "forbidden", "Requests from web pages are not accepted here")(scope, receive, send)
            return
        await self._checked(scope, receive, send)

    async def _requests_only(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what :func:`not_a_request` names, as MCP's Streamable HTTP transport has it for
        input the server cannot accept: 400, a JSON-RPC error with no id (-32600 Invalid
        Request); hand everything else to the SDK, its body replayed."""
        body, messages = await read_all(receive)
        try:  # parsed as the SDK parses it: an integer id beyond 64 bits stays an integer
            reason = not_a_request(pydantic_core.from_json(body))
        except ValueError:  # the SDK answers a parse error
            reason = None
        if reason is not None:
            refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": reason}}
            await json_response(refusal, 400)(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        assert self._manager is not None
        await self._manager.handle_request(scope, replay, send)
