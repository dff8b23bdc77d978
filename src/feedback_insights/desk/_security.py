"""Who may use the desk and how its pages defend themselves.

- **Sessions** (:class:`Sessions`) are random ids sent as an HttpOnly, SameSite=Strict
  cookie. Every visitor gets one, logged in or not, because every form carries the session's
  CSRF token (:func:`posted` compares it with :func:`hmac.compare_digest` and answers 403 when
  it is missing or wrong). A visitor's costs the desk no memory, so that no flood of requests
  can push a reviewer's out; a login's is kept server-side and replaces the visitor's (no
  fixation).
- **Login**: with a token (``[desk] token_env``, required off the loopback address: the desk
  will not even be made without one, :meth:`Access.of`) a reviewer
  exchanges it and their name for a logged-in session; the name is who their decisions are
  recorded as. Without one, the desk serves this machine only and decisions are recorded as
  ``[desk] reviewer``, else ``$FEEDBACK_INSIGHTS_USER`` or the login name, but never a shared
  account's (``root``): then the desk asks the reviewer's name first, as a login without a
  token. Never a form field of the action itself.
- **Headers**: a strict Content-Security-Policy (no script at all, styles and images from the
  desk only), ``nosniff``, no referrer to other sites, no framing.
- **Host**: served on the loopback address, a request must name a loopback host, so a web page
  that points its own domain at 127.0.0.1 (DNS rebinding) cannot read or drive the desk.
"""

from __future__ import annotations

import hmac
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from starlette.datastructures import FormData

from ..config import DeskConfig
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
#: Logins kept at most (the oldest are dropped first), and visitors' notes likewise: only a
#: holder of the token adds a login, and only a request with the desk's cookie a note.
MAX_SESSIONS = 2000
#: The largest form the desk reads (a draft's body is at most 60,000 characters, 5 bytes each
#: at worst once percent-encoded) and the most fields (ticked reports) in one.
MAX_FORM_BYTES = 1_000_000
MAX_FORM_FIELDS = 20_000
#: The longest reviewer name a login accepts.
MAX_NAME = 64
#: A session id as :func:`secrets.token_urlsafe` makes them: anything else is no cookie of ours.
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")
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
    """One visitor's session as a request sees it."""

    id: str
    csrf: str
    created: float
    #: Who decisions are recorded as: the login's name, or None before a login.
    reviewer: str | None = None
    #: What the last action did, shown once by the next page (post-redirect-get).
    flash: list[str] = field(default_factory=list)


class Sessions:
    """Sessions that no stranger can push out.

    Any web page can make a browser send requests to a desk on 127.0.0.1, cookieless (the
    cookie is SameSite=Strict), and each such request is a new visitor. So a visitor's session
    is nothing but its random id: the CSRF token of its forms is an HMAC of the id under a key
    of this process (a restart makes open forms stale, as it logs reviewers out), and nothing
    of it is stored. The desk keeps only

    - logins, made with the token: at most :data:`MAX_SESSIONS`, the oldest dropped first, for
      :attr:`lifetime` seconds each;
    - a visitor's notes of its last action, until its next page shows them, and only when the
      request came with the desk's cookie (a stranger's request never does): at most
      :data:`MAX_SESSIONS`."""

    def __init__(self, lifetime_seconds: float) -> None:
        self.lifetime = lifetime_seconds
        self._key = secrets.token_bytes(32)
        self._logins: OrderedDict[str, Session] = OrderedDict()
        self._notes: OrderedDict[str, list[str]] = OrderedDict()

    def get(self, session_id: str | None) -> Session | None:
        """The session of a request's cookie: its login, or else a visitor's with its notes;
        None for no cookie of ours or an expired login."""
        if not session_id or not _SESSION_ID.fullmatch(session_id):
            return None
        found = self._logins.get(session_id)
        if found is None:
            return Session(session_id, self._csrf(session_id), time.monotonic(), flash=self._notes.pop(session_id, []))
        if time.monotonic() - found.created > self.lifetime:
            self.drop(found)
            return None
        return found

    def new(self, reviewer: str | None = None) -> Session:
        """A visitor's session, stored nowhere; or, for ``reviewer``, a login's."""
        session_id = secrets.token_urlsafe(32)
        if reviewer is None:
            return Session(session_id, self._csrf(session_id), time.monotonic())
        session = Session(session_id, secrets.token_urlsafe(32), time.monotonic(), reviewer)
        self._logins[session_id] = session
        while len(self._logins) > MAX_SESSIONS:
            self._logins.popitem(last=False)
        return session

    def keep(self, session: Session) -> None:
        """After a request that came with ``session``'s cookie: a visitor's notes are kept for
        its next page (a login keeps its own)."""
        if session.id in self._logins:
            return
        self._notes.pop(session.id, None)
        if session.flash:
            self._notes[session.id] = session.flash
            while len(self._notes) > MAX_SESSIONS:
                self._notes.popitem(last=False)

    def drop(self, session: Session) -> None:
        self._logins.pop(session.id, None)
        self._notes.pop(session.id, None)

    def _csrf(self, session_id: str) -> str:
        return hmac.new(self._key, session_id.encode(), "sha256").hexdigest()


@dataclass(frozen=True, slots=True)
class Access:
    """How this desk lets people in: the token (None: loopback only, no login) and the name
    decisions are recorded as without a login (None: there is no person's name to use, so
    the desk asks for one)."""

    token: str | None
    default_reviewer: str | None
    #: The host names a request may use (None: any; a token guards the desk instead).
    hosts: frozenset[str] | None

    @classmethod
    def of(cls, host: str, token: str | None, default_reviewer: str | None,
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

    @property
    def asks_name(self) -> bool:
        """Whether a visitor gives a name (and the token, when there is one) before anything else."""
        return self.token is not None or self.default_reviewer is None

    def reviewer(self, session: Session) -> str:
        """Who ``session``'s decisions are recorded as (the gate lets no one act unlogged)."""
        name = session.reviewer if self.asks_name else self.default_reviewer
        return name or "nobody yet"  # only a page shown before the login says this


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
    given = form.getlist("csrf")
    if len(given) != 1 or not hmac.compare_digest(str(given[0]).encode(), session_of(request).csrf.encode()):
        raise Forbidden("this form is out of date or was not sent by the desk (CSRF token missing or wrong): "
                        "reload the page and try again")
    return form


#: A route's checked form: every POST route takes one.
Posted = Annotated[FormData, Depends(posted)]


def person(name: str | None) -> str | None:
    """``name`` when it names a person, None for a shared account (``root``) or nothing."""
    return name if name and name.strip().lower() not in DeskConfig.SHARED_ACCOUNTS else None


def reviewer_name(value: str) -> str:
    """A login's name as it will appear in the audit: one printable line, a person's."""
    name = " ".join(value.split())
    if not name:
        raise BadInput("name", "say who you are: decisions are recorded with your name")
    if person(name) is None:
        raise BadInput("name", f"{name} is a shared account: give your own name, decisions are recorded with it")
    if len(name) > MAX_NAME or not name.isprintable():
        raise BadInput("name", f"at most {MAX_NAME} printable characters")
    return name
