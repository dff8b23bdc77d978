"""The collector's HTTP API (FastAPI): AFP's push side, Agent Feedback Spec and SEP-2369
compatibility, and the pull and known-issue endpoints the pipeline uses.

Every accepted report is scrubbed and its account pseudonymised before it is stored: the
collector never keeps a secret an agent pasted. Keys are compared by their SHA-256. Each
request is logged as one JSON line with no feedback text in it.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError

from . import _agents, _pipeline, _services
from ._collector import Collector
from ._http import Refused, error
from ._middleware import LogAndLink


def create_app(collector: Collector) -> FastAPI:
    app = FastAPI(
        title="feedback-insights collector",
        summary="Agent feedback in (AFP, Agent Feedback Spec v1, SEP-2369), records and known issues out.",
        version="0.1.0",
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        """Query and path mistakes in the AFP error shape, like body mistakes."""
        details = [{"path": ".".join(str(p) for p in e["loc"][1:]), "message": e["msg"]} for e in exc.errors()]
        return error(400, "invalid_request", "; ".join(f"{d['path']}: {d['message']}" for d in details), details)

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> Response:
        return exc.response

    app.add_middleware(LogAndLink)
    for routes in (_agents.router(collector), _services.router(collector), _pipeline.router(collector)):
        app.include_router(routes)
    return app
