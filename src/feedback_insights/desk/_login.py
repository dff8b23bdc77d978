"""Logging in with the desk's token, and out: a new session each time (no fixation). A desk
without a token whose user is a shared account (``root``) asks the reviewer's name alone.

Both are ``async`` routes, run on the event loop like the middleware that looks sessions up,
so that the sessions are never changed from two threads at once."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from . import _forms
from ._errors import Forbidden
from ._pages import page
from ._security import Posted, reviewer_name, session_of

router = APIRouter()

#: Seconds a wrong token waits before its answer: guessing goes slower, and no other request
#: waits meanwhile (the event loop sleeps, no thread does).
FAILED_LOGIN_DELAY = 0.5


@router.get("/login")
def login_form(request: Request) -> Response:
    desk = request.app.state.desk
    if not desk.access.asks_name or session_of(request).reviewer is not None:
        return RedirectResponse("/drafts", status_code=303)
    return page(request, "login.html.j2", token=desk.access.token is not None)


@router.post("/login")
async def login(request: Request, form: Posted) -> Response:
    desk = request.app.state.desk
    if not desk.access.asks_name:
        return RedirectResponse("/drafts", status_code=303)
    name = reviewer_name(_forms.single(form, "name"))
    if desk.access.token is not None and not desk.access.token_matches(_forms.single(form, "token")):
        await asyncio.sleep(FAILED_LOGIN_DELAY)
        raise Forbidden("wrong token", back="/login")
    desk.sessions.drop(session_of(request))
    request.state.session = desk.sessions.new(reviewer=name)
    return RedirectResponse("/drafts", status_code=303)


@router.post("/logout")
async def logout(request: Request, form: Posted) -> Response:
    desk = request.app.state.desk
    desk.sessions.drop(session_of(request))
    request.state.session = desk.sessions.new()
    return RedirectResponse("/login" if desk.access.asks_name else "/drafts", status_code=303)
