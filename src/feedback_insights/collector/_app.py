"""The collector's HTTP API (FastAPI): AFP's push side, Agent Feedback Spec and SEP-2369
compatibility, the MCP server at ``/mcp`` (``submit_feedback``, ``submit_agent_feedback``), and the
pull and known-issue endpoints the pipeline uses.

Every accepted report is scrubbed and its account pseudonymised before it is stored: the
collector never keeps a secret an agent pasted. Keys are compared by their SHA-256. Each
request is logged as one JSON line with no feedback text in it.
"""

from __future__ import annotations

from http import HTTPStatus

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from . import _agents, _pipeline, _services
from ._collector import Collector
from ._http import Refused, error
from ._mcp import McpEndpoint
from ._middleware import LogAndLink

_MESSAGES = {404: "No such endpoint: the API is described at /openapi.json"}


def allowed_methods(scope: Scope, routes: list[BaseRoute]) -> list[str]:
    """Every method some route takes at this path. Starlette's own ``Allow`` names only the
    first route that matched it, and ``/v1/records`` has two (GET and POST)."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods or set()
    return sorted(methods)


def http_error(request: Request, exc: HTTPException, routes: list[BaseRoute]) -> Response:
    """Starlette's own errors (unknown path, wrong method) in the AFP shape, like ours."""
    status = HTTPStatus(exc.status_code)
    headers = dict(exc.headers or {})
    message = _MESSAGES.get(status, status.phrase)
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        allowed = ", ".join(allowed_methods(request.scope, routes))
        headers = {**{k: v for k, v in headers.items() if k.lower() != "allow"}, "allow": allowed}
        message = f"{request.method} is not allowed here (Allow: {allowed})"
    return error(status, status.phrase.lower().replace(" ", "_").replace("-", "_"), message, headers=headers)


def create_app(collector: Collector) -> FastAPI:
    # The MCP endpoint's session manager lives as long as the app: it runs in the app's lifespan.
    mcp = McpEndpoint(collector)
    app = FastAPI(
        title="feedback-insights collector",
        summary="Agent feedback in (AFP, Agent Feedback Spec v1, SEP-2369), records and known issues out.",
        description="Agents: `/llms.txt` describes the feedback endpoints; MCP clients connect to `/mcp` "
                    "(Streamable HTTP, tools `submit_feedback` and `submit_agent_feedback`).",
        version="0.1.0",
        lifespan=mcp.lifespan,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        """Query and path mistakes in the AFP error shape, like body mistakes."""
        details = [{"path": ".".join(str(p) for p in e["loc"][1:]), "message": e["msg"]} for e in exc.errors()]
        return error(400, "invalid_request", "; ".join(f"{d['path']}: {d['message']}" for d in details), details)

    routers = [_agents.router(collector), _services.router(collector), _pipeline.router(collector)]
    # FastAPI keeps included routers as routers: the routes themselves, for Allow headers.
    # /mcp is the SDK's ASGI app, not an operation of the OpenAPI document (its JSON-RPC is not).
    app.router.routes.append(mcp.route)
    routes = [*app.router.routes, *(route for router in routers for route in router.routes)]

    @app.exception_handler(HTTPException)
    async def starlette_error(request: Request, exc: HTTPException) -> Response:
        return http_error(request, exc, routes)

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> Response:
        return exc.response

    app.add_middleware(LogAndLink)
    for router in routers:
        app.include_router(router)
    return app
