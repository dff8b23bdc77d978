"""Who may use the desk and how its pages defend themselves.

- **Sessions** are random ids kept server-side (:class:`Sessions`), sent as an HttpOnly,
  SameSite=Strict cookie. Every visitor gets one, logged in or not, because every form carries
  the session's CSRF token (:func:`posted` compares it with :func:`hmac.compare_digest` and
  answers 403 when it is missing or wrong). A login replaces the session (no fixation).
- **Login**: with a token (``[desk] token_env``, required off the loopback address: the desk
  will not even be made without one, :meth:`Access.of`) a reviewer
  exchanges it and their name for a logged-in session; the name is who their decisions are
  recorded as. Without one, the desk serves this machine only and decisions are recorded as
  ``[desk] reviewer`` or ``$FEEDBACK_INSIGHTS_USER``. Never a form field of the action itself.
- **Headers**: a strict Content-Security-Policy (no script at all, styles and images from the
  desk only), ``nosniff``, no referrer to other sites, no framing.
- **Host**: served on the loopback address, a request must name a loopback host, so a web page
  that points its own domain at 127.0.0.1 (DNS rebinding) cannot read or drive the desk.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from starlette.datastructures import FormData

from ._errors import BadInput, Forbidden, TooLarge

COOKIE = "desk_session"
#: The policy of every page; the HTML digest alone relaxes styles (see ``_digests``).
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}
#: Sessions kept at most, of visitors and of reviewers each (the oldest are dropped first):
#: visitors cannot fill the memory.
MAX_SESSIONS = 2000
#: The largest form the desk reads (a draft's body is at most 60,000 characters, 5 bytes each
#: at worst once percent-encoded) and the most fields (ticked reports) in one.
MAX_FORM_BYTES = 1_000_000
MAX_FORM_FIELDS = 20_000
#: The longest reviewer name a login accepts.
MAX_NAME = 64
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
#: The shortest login token the desk accepts: a guessable one would be no lock at all.
MIN_TOKEN = 16


class DeskRefused(ValueError):
    """The desk will not start as asked: an address other than loopback without a (long
    enough) token, or a port it cannot listen on."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(slots=True)
class Session:
    id: str
    csrf: str
    created: float
    #: Who decisions are recorded as: the login's name, or None before a login.
    reviewer: str | None = None
    #: What the last action did, shown once by the next page (post-redirect-get).
    flash: list[str] = field(default_factory=list)


class Sessions:
    """Random session ids held in memory: a restart logs everyone out, which is fine for a desk.

    Visitors who have not logged in are kept apart from reviewers who have, each to
    :data:`MAX_SESSIONS`, so that a flood of anonymous visits drops the oldest anonymous
    sessions and never a reviewer's."""

    def __init__(self, lifetime_seconds: float) -> None:
        self.lifetime = lifetime_seconds
        self._anonymous: OrderedDict[str, Session] = OrderedDict()
        self._reviewers: OrderedDict[str, Session] = OrderedDict()

    def get(self, session_id: str | None) -> Session | None:
        key = session_id or ""
        found = self._reviewers.get(key) or self._anonymous.get(key)
        if found is not None and time.monotonic() - found.created > self.lifetime:
            self.drop(found)
            return None
        return found

    def new(self, reviewer: str | None = None) -> Session:
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.monotonic(), reviewer)
        kept = self._anonymous if reviewer is None else self._reviewers
        kept[session.id] = session
        while len(kept) > MAX_SESSIONS:
            kept.popitem(last=False)
        return session

    def drop(self, session: Session) -> None:
        self._anonymous.pop(session.id, None)
        self._reviewers.pop(session.id, None)


@dataclass(frozen=True, slots=True)
class Access:
    """How this desk lets people in: the token (None: loopback only, no login) and the name
    decisions are recorded as without a login."""

    token: str | None
    default_reviewer: str
    #: The host names a request may use (None: any; a token guards the desk instead).
    hosts: frozenset[str] | None

    @classmethod
    def of(cls, host: str, token: str | None, default_reviewer: str,
           token_env: str = "the desk's token variable") -> Access:
        """The access of a desk served on ``host``; :class:`DeskRefused` for one that anyone
        who can reach it could use (no token off loopback) or that a guess would open."""
        if token is None and not is_loopback(host):
            raise DeskRefused(f"--host {host} is reachable from other machines: set {token_env} to a long "
                              "random token first (reviewers log in with it), or serve on 127.0.0.1")
        if token is not None and len(token) < MIN_TOKEN:
            raise DeskRefused(f"{token_env} is {len(token)} characters: use at least {MIN_TOKEN} random ones "
                              "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        hosts = None if token or not is_loopback(host) else _LOOPBACK_NAMES | {host}
        return cls(token, default_reviewer, hosts)

    def host_allowed(self, header: str) -> bool:
        if self.hosts is None:
            return True
        name = header.rsplit(":", 1)[0] if not header.endswith("]") else header
        return name in self.hosts

    def token_matches(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def reviewer(self, session: Session) -> str:
        """Who ``session``'s decisions are recorded as (the gate lets no one act unlogged)."""
        return session.reviewer if self.token and session.reviewer else self.default_reviewer


def session_of(request: Request) -> Session:
    """The request's session (the middleware gives every request one)."""
    session: Session = request.state.session
    return session


async def posted(request: Request) -> FormData:
    """The posted form, once its CSRF token is checked against the session's. Read here, as
    it arrives, so that no body over :data:`MAX_FORM_BYTES` is kept whatever its
    Content-Length says (or a chunked one, without any); the desk's forms are all urlencoded."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = bytearray()
    if kind == "application/x-www-form-urlencoded":  # anything else is no form of ours: no token
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise TooLarge(f"that form is over {MAX_FORM_BYTES:,} bytes: the desk reads no more")
    try:
        fields = parse_qsl(body.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict",
                           max_num_fields=MAX_FORM_FIELDS)
    except UnicodeDecodeError:
        raise BadInput("form", "not UTF-8") from None
    except ValueError:
        raise BadInput("form", f"more than {MAX_FORM_FIELDS:,} fields") from None
    form = FormData([(name, value) for name, value in fields])
    given = str(form.get("csrf") or "")
    if not hmac.compare_digest(given.encode(), session_of(request).csrf.encode()):
        raise Forbidden("this form is out of date or was not sent by the desk (CSRF token missing or wrong): "
                        "reload the page and try again")
    return form


#: A route's checked form: every POST route takes one.
Posted = Annotated[FormData, Depends(posted)]


def reviewer_name(value: str) -> str:
    """A login's name as it will appear in the audit: one printable line."""
    name = " ".join(value.split())
    if not name:
        raise BadInput("name", "say who you are: decisions are recorded with your name")
    if len(name) > MAX_NAME or not name.isprintable():
        raise BadInput("name", f"at most {MAX_NAME} printable characters")
    return name
