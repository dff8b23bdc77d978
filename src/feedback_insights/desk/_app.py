"""The desk as an ASGI application: :func:`create_app` wires the pages, the security of
:mod:`._security` and the warehouse's turns of :mod:`._store`, and answers every failure
with a page of its own (never a traceback)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from ..clusters import default_actor
from ..config import Config
from . import _clusters, _digests, _drafts, _login, _quotes, _unclustered
from ._errors import DeskError
from ._pages import page
from ._security import COOKIE, CSP, HEADERS, Access, Sessions, person
from ._store import Busy, Turns

log = logging.getLogger(__name__)

#: Seconds a "busy" page waits before it asks again.
RETRY_AFTER = 3
#: Paths anyone may fetch before logging in.
_OPEN = ("/login", "/static/")


@dataclass(frozen=True, slots=True)
class Desk:
    """What every request of one desk shares (``app.state.desk``)."""

    config: Config
    access: Access
    sessions: Sessions
    turns: Turns


def create_app(config: Config, host: str, token: str | None, lock_wait: float = 2.0) -> FastAPI:
    """The desk over ``config``'s warehouse, as served on ``host``. With ``token``, reviewers
    log in with it; without one the desk answers only requests for a loopback host name, and
    is refused (:class:`DeskRefused`) for any other ``host``.
    ``lock_wait``: seconds a request waits for the scheduled flows before it says "busy"."""
    app = FastAPI(title="feedback-insights desk", docs_url=None, redoc_url=None, openapi_url=None)
    reviewer = config.desk.reviewer or person(default_actor())
    app.state.desk = Desk(
        config=config,
        access=Access.of(host, token, reviewer, config.desk.token_env),
        sessions=Sessions(config.desk.session_hours * 3600),
        turns=Turns(config.warehouse.path, lock_wait),
    )
    app.mount("/static", StaticFiles(packages=[("feedback_insights.desk", "static")]), name="static")
    for module in (_login, _drafts, _quotes, _clusters, _unclustered, _digests):
        app.include_router(module.router)
    app.add_api_route("/", lambda: RedirectResponse("/drafts", status_code=303), methods=["GET"], include_in_schema=False)
    app.middleware("http")(_guard)
    _handle_errors(app)
    return app


async def _guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Before every route: the host, the session and the login; after it, the headers, and the
    cookie of a new session or the notes of a returning visitor's (:meth:`Sessions.keep`)."""
    desk: Desk = request.app.state.desk
    if not desk.access.host_allowed(request.headers.get("host", "")):
        return _secured(HTMLResponse("This desk answers only requests for 127.0.0.1 or localhost.", status_code=421))
    if request.url.path.startswith("/static/"):
        return _secured(await call_next(request))
    found = desk.sessions.get(request.cookies.get(COOKIE))
    request.state.session = found or desk.sessions.new()
    if desk.access.asks_name and request.state.session.reviewer is None and not request.url.path.startswith(_OPEN):
        if request.method in ("GET", "HEAD"):
            response: Response = RedirectResponse("/login", status_code=303)
        else:
            response = page(request, "error.html.j2", 403, message="log in first", back="/login")
    else:
        response = await call_next(request)
    session = request.state.session
    if found is not None and session is found:
        desk.sessions.keep(found)
    else:  # new, or replaced by a login or a logout
        response.set_cookie(COOKIE, session.id, max_age=int(desk.sessions.lifetime), httponly=True,
                            samesite="strict", secure=request.url.scheme == "https", path="/")
    return _secured(response)


def _secured(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CSP)
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def _handle_errors(app: FastAPI) -> None:
    @app.exception_handler(DeskError)
    async def refused(request: Request, exc: DeskError) -> Response:
        heading = "Not found" if exc.status == 404 else "Cannot do that"
        return page(request, "error.html.j2", exc.status, message=str(exc), back=exc.back, heading=heading)

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> Response:
        # A page asks again by itself (meta refresh); a form that was not saved goes back to
        # the page it came from, which says so.
        query = f"?{request.url.query}" if request.url.query else ""
        again = request.url.path + query if request.method == "GET" else request.url.path.rsplit("/", 1)[0] or "/"
        return page(request, "busy.html.j2", 503, headers={"Retry-After": str(RETRY_AFTER)},
                    reason=str(exc), again=again, saved=request.method == "GET", seconds=RETRY_AFTER)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0]
        loc: tuple[Any, ...] = tuple(first.get("loc") or ())
        name = str(loc[-1]) if loc else "request"
        if request.method == "GET" and len(loc) == 2 and loc[0] == "path" and name.endswith("_id"):
            # /drafts/abc: a page that cannot exist, said plainly (a form posted to one names the field)
            thing = name.removesuffix("_id")
            given = str(first.get("input", ""))
            shown = given if len(given) <= 40 else given[:39] + "\u2026"
            return page(request, "error.html.j2", 404, back=f"/{thing}s", heading="Not found",
                        message=f"There is no {thing} \u201c{shown}\u201d: {thing}s are numbered 1, 2, 3 and so on.")
        return page(request, "error.html.j2", 400, message=f"{name}: {first['msg'].lower()}", back=None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        message = "no such page" if exc.status_code == 404 else str(exc.detail).lower()
        if not hasattr(request.state, "session"):
            return _secured(HTMLResponse(message, status_code=exc.status_code))
        return page(request, "error.html.j2", exc.status_code, message=message, back=None)

    @app.exception_handler(ClientDisconnect)
    async def gone(request: Request, exc: ClientDisconnect) -> Response:
        # The form never arrived whole: the server has answered 408 (its body deadline) or the
        # client left; nobody reads this answer, and nothing was changed.
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> Response:
        log.exception("desk: %s %s failed", request.method, request.url.path)
        return _secured(HTMLResponse("<!doctype html><title>Error</title><p>Something went wrong on the desk; "
                                     "its log says what.</p>", status_code=500))
