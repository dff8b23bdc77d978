"""A real HTTP fake of the slice of the GitHub REST API that the issue publisher uses.

PyGithub talks to it over a socket exactly as it talks to api.github.com, so tests exercise the
real client: its URL building, its pagination (it follows the Link header), its mapping of status
codes to exceptions, its redirects and its timeouts. Faults can be injected per request, including
the one that makes exactly-once hard: the write happened but the client never heard back.

Strict where GitHub is strict (each shape as GitHub sends it, per its REST docs and the answers
quoted in public bug reports): 422 "Validation Failed" for a title over 256 characters, a body or
comment over 65,536 or a label name over 50; the rate limit headers on every answer and a 403 once
the hour's quota is used up; 301 from a transferred issue to its new home; for a renamed
repository, 301 to reads and 307 to writes, pointing at ``/repositories/{id}``.

Tokens act for users with a role on each repository (read, triage, write, maintain, admin; the
repository's ``permissions`` say which). As on GitHub, labels, assignees and a milestone sent by a
token without triage access are dropped silently, the issue is still created; creating labels
needs push access, and a change a token may not make is answered 404, as GitHub hides it.

Secondary rate limits, per user, as GitHub documents them: more than 80 content-creating requests
(POST, PATCH, PUT, DELETE) a minute or 500 an hour, or more than 100 requests at once, are
answered 403 "You have exceeded a secondary rate limit" with Retry-After, and nothing is done. The
windows run on the fake's clock, which tests may share with the publisher (:class:`VirtualClock`).

Injectable: 403 "Resource not accessible by integration", 404, 410 "Issues are disabled",
primary limits (403 or 429, ``X-RateLimit-Remaining: 0``, no Retry-After) and secondary limits
with and without Retry-After.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

LOGIN = "feedback-bot"
USER_ID = 1
DOCS = "https://docs.github.com/rest"
SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
PRIMARY_RATE_LIMIT = f"API rate limit exceeded for user ID {USER_ID}."
RATE_LIMIT_DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
REDIRECT_DOCS = (
    "https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#follow-redirects"
)
# GitHub's limits, in characters.
TITLE_LIMIT = 256
BODY_LIMIT = 65_536
LABEL_LIMIT = 50
# A token's primary rate limit: requests per hour-long window.
RATE_LIMIT = 5000
RATE_WINDOW = 3600
#: GitHub's secondary limits on content-creating requests: (requests, seconds) per user.
WRITE_LIMITS = ((80, 60.0), (500, 3600.0))
#: Requests GitHub serves at once, for one user, before it refuses more.
MAX_CONCURRENT = 100
#: Repository roles, weakest first.
ROLES = ("read", "triage", "write", "maintain", "admin")
_WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})
# Labels that GitHub creates on the fly (named in an issue but not defined yet) get this colour.
AUTO_LABEL_COLOR = "ededed"
FAULT_KINDS = frozenset(
    {
        "timeout_after_effect",
        "timeout_before_effect",
        "secondary_rate_limit",
        "rate_limit_429",
        "server_error",
        "server_error_after_effect",
        "primary_rate_limit",
        "primary_rate_limit_429",
        "secondary_rate_limit_no_retry_after",
        "integration_forbidden",
        "repo_not_found",
        "issues_disabled",
        "validation_failed",
    }
)
# Refusals no retry changes: (status, message).
_REFUSALS = {
    "integration_forbidden": (403, "Resource not accessible by integration"),
    "repo_not_found": (404, "Not Found"),
    "issues_disabled": (410, "Issues are disabled for this repo"),
}
_STATE_REASONS = frozenset({"completed", "not_planned", "duplicate", "reopened"})

# (status, JSON body, headers); the body is encoded under the lock, so it is one consistent state.
_Reply = tuple[int, bytes, dict[str, str]]


def _reply(status: int, payload: Any, headers: dict[str, str] | None = None) -> _Reply:
    return status, json.dumps(payload).encode(), headers or {}


def _error(
    status: int, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> _Reply:
    payload = {"message": message, "documentation_url": DOCS, "status": str(status), **extra}
    return _reply(status, payload, headers)


class _HttpError(Exception):
    """Ends a request with an error answer from wherever inside a route it was detected."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.reply = _error(status, message, **extra)


class _NotAllowed(_HttpError):
    """A change the token may not make: GitHub answers 404, hiding what it may not touch."""

    def __init__(self) -> None:
        super().__init__(404, "Not Found")


class _Moved(Exception):
    """The issue was transferred: the request is answered with a 301 to its new home."""

    def __init__(self, repo_id: int, number: int) -> None:
        self.path = f"/repositories/{repo_id}/issues/{number}"
        super().__init__(self.path)


def _invalid(resource: str, field_name: str, code: str = "invalid", **detail: Any) -> _HttpError:
    """GitHub's 422 for a request it understood but will not carry out."""
    error = {"resource": resource, "code": code, "field": field_name, **detail}
    return _HttpError(422, "Validation Failed", errors=[error])


def _check_length(resource: str, field_name: str, value: Any, limit: int) -> None:
    """GitHub's 422 for text over its limit, worded as GitHub words it."""
    if isinstance(value, str) and len(value) > limit:
        message = f"{field_name} is too long (maximum is {limit} characters)"
        raise _invalid(resource, field_name, "custom", message=message)


def _rate_headers(used: int, limit: int, reset: int) -> dict[str, str]:
    """The primary rate limit headers GitHub sends on every answer (reset: UTC epoch seconds)."""
    return {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(max(limit - used, 0)),
        "X-RateLimit-Reset": str(reset),
        "X-RateLimit-Used": str(min(used, limit)),
        "X-RateLimit-Resource": "core",
    }


def _primary_limit(status: int, limit: int, reset: int) -> _Reply:
    """The quota is used up until ``reset``: no Retry-After, only the headers say when."""
    headers = _rate_headers(limit, limit, reset)
    return _reply(
        status,
        {"message": PRIMARY_RATE_LIMIT, "documentation_url": RATE_LIMIT_DOCS, "status": str(status)},
        headers,
    )


def _now() -> datetime:
    """Whole seconds, as GitHub shows them, so `since` compares like the rendered timestamps."""
    return datetime.now(UTC).replace(microsecond=0)


def _iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    kind: str
    times: int
    retry_after: int
    delay: float
    reset_in: int


@dataclass
class _User:
    """Who a token acts for, and its role on each repository."""

    login: str
    id: int
    role: str  # on a repository not in ``roles``
    roles: dict[int, int] = field(default_factory=dict)  # repository id → index in ROLES

    def may(self, repo: _Repo, role: str) -> bool:
        """Whether the user's role on ``repo`` is ``role`` or stronger."""
        held = self.roles.get(repo.id, ROLES.index(self.role))
        return held >= ROLES.index(role)


@dataclass
class _Issue:
    id: int
    number: int
    title: str
    body: str | None
    labels: list[str]  # names of the repository's labels, in the order they were attached
    created_at: datetime
    updated_at: datetime
    user: _User
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    comments: list[dict[str, Any]] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    milestone: int | None = None


@dataclass
class _Repo:
    id: int
    full_name: str
    issues: dict[int, _Issue] = field(default_factory=dict)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # label JSON by name
    milestones: dict[int, str] = field(default_factory=dict)  # number → title
    # Issue numbers are never reused, even after a transfer took one away.
    numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    # Transferred issues: old number → (repository id, number) where they live now.
    moved: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass
class _Request:
    path: str  # as sent, percent-encoded, without the query string
    query: dict[str, str]
    body: dict[str, Any]
    caller: _User


class VirtualClock:
    """Seconds that pass only when someone sleeps: shared by the fake's rate limit windows and
    the publisher's pacing, a test keeps GitHub's real limits and still runs in milliseconds."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self.waits: list[float] = []

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._now += max(seconds, 0.0)


class GitHubFake:
    """The fake's state and its HTTP semantics; `running_github` puts it on a socket.

    State is only touched under the lock: the server answers each connection in its own thread.
    """

    def __init__(self, url: str, token: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.token = token
        self.requests: list[tuple[str, str]] = []
        #: Writes refused by a secondary rate limit: (method, path).
        self.secondary_limited: list[tuple[str, str]] = []
        #: (requests, seconds): the secondary limits on each user's content-creating requests.
        self.write_limits = WRITE_LIMITS
        self.max_concurrent = MAX_CONCURRENT
        #: What the secondary limit windows are timed by; a test may hand it the publisher's.
        self.clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._repos: dict[str, _Repo] = {}
        # A renamed repository's old name → its id.
        self._renamed: dict[str, int] = {}
        self._tokens = {token: _User(LOGIN, USER_ID, "admin")}
        self._user_ids = itertools.count(USER_ID + 1)
        self._writes: dict[str, deque[float]] = {}
        self._in_flight = 0
        self._faults: list[_Fault] = []
        #: The token's requests per hour; tests lower it to use the quota up.
        self.rate_limit = RATE_LIMIT
        self._used = 0
        self._window_reset = 0
        repo = r"/repos/([^/]+/[^/]+)"
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., _Reply]]] = [
            (method, re.compile(pattern), handler)
            for method, pattern, handler in [
                ("GET", r"/user", self._get_user),
                ("GET", repo, self._get_repo),
                ("GET", rf"{repo}/issues", self._list_issues),
                ("POST", rf"{repo}/issues", self._create_issue),
                ("GET", rf"{repo}/issues/(\d+)", self._get_issue),
                ("PATCH", rf"{repo}/issues/(\d+)", self._edit_issue),
                ("POST", rf"{repo}/issues/(\d+)/comments", self._create_comment),
                ("GET", rf"{repo}/issues/(\d+)/comments", self._list_comments),
                ("GET", rf"{repo}/issues/comments/(\d+)", self._get_comment),
                ("PATCH", rf"{repo}/issues/comments/(\d+)", self._edit_comment),
                ("GET", rf"{repo}/labels", self._list_labels),
                ("POST", rf"{repo}/labels", self._create_label),
                ("GET", rf"{repo}/labels/([^/]+)", self._get_label),
                ("GET", rf"{repo}/milestones/(\d+)", self._get_milestone),
            ]
        ]

    # What tests arrange and inspect.

    def add_repo(self, full_name: str) -> None:
        with self._lock:
            self._repos[full_name] = _Repo(next(self._ids), full_name)

    def add_token(self, token: str, login: str, role: str = "write") -> None:
        """Another token, acting for the user ``login`` with ``role`` on every repository."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; one of {ROLES}")
        with self._lock:
            self._tokens[token] = _User(login, next(self._user_ids), role)

    def grant(self, token: str, full_name: str, role: str) -> None:
        """Give the token's user ``role`` on one repository (its role elsewhere is kept)."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; one of {ROLES}")
        with self._lock:
            self._tokens[token].roles[self._repos[full_name].id] = ROLES.index(role)

    def rename_repo(self, full_name: str, new_name: str) -> None:
        """The owner renames the repository: its old name redirects from now on, as GitHub's does."""
        with self._lock:
            repo = self._repos.pop(full_name)
            repo.full_name = new_name
            self._repos[new_name] = repo
            self._renamed[full_name] = repo.id
            for label in repo.labels.values():
                label["url"] = f"{self.url}/repos/{new_name}/labels/{quote(label['name'], safe='')}"

    def add_milestone(self, full_name: str, title: str) -> int:
        """A maintainer creates a milestone; its number."""
        with self._lock:
            milestones = self._repos[full_name].milestones
            number = len(milestones) + 1
            milestones[number] = title
            return number

    def edit_comment(self, full_name: str, comment_id: int, body: str) -> None:
        """A maintainer edits a comment on github.com (its author stays who wrote it)."""
        with self._lock:
            comment = _comment(self._repos[full_name], str(comment_id))
            comment.update(body=body, updated_at=_iso(_now()))

    def repo_id(self, full_name: str) -> int:
        with self._lock:
            return self._repos[full_name].id

    def issues(self, full_name: str) -> list[dict[str, Any]]:
        with self._lock:
            repo = self._repos[full_name]
            return [self._issue_json(repo, repo.issues[n]) for n in sorted(repo.issues)]

    def comments(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(c) for c in self._repos[full_name].issues[number].comments]

    def labels(self, full_name: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: dict(label) for name, label in self._repos[full_name].labels.items()}

    def fail(
        self,
        method: str,
        path_regex: str,
        kind: str,
        times: int = 1,
        retry_after: int | None = None,
        delay: float = 3.0,
        reset_in: int = 30,
    ) -> None:
        """Make the next `times` requests matching method and path (no query string) fail.

        `retry_after` is the Retry-After of the secondary limits that send one; `reset_in` the
        seconds until a primary limit's X-RateLimit-Reset."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {sorted(FAULT_KINDS)}")
        if times < 1:
            raise ValueError("times must be at least 1")
        fault = _Fault(
            method.upper(),
            re.compile(path_regex),
            kind,
            times,
            1 if retry_after is None else retry_after,
            delay,
            reset_in,
        )
        with self._lock:
            self._faults.append(fault)

    def close_issue(self, full_name: str, number: int, state_reason: str = "completed") -> None:
        """A maintainer closes the issue on github.com."""
        with self._lock:
            self._set_state(self._repos[full_name].issues[number], "closed", state_reason)

    def reopen_issue(self, full_name: str, number: int) -> None:
        """A maintainer reopens the issue on github.com."""
        with self._lock:
            self._set_state(self._repos[full_name].issues[number], "open", None)

    def transfer_issue(self, full_name: str, number: int, to: str) -> int:
        """A maintainer transfers the issue to another repository; its number there. The old
        address answers 301 from now on, as GitHub's does."""
        with self._lock:
            source, target = self._repos[full_name], self._repos[to]
            issue = source.issues.pop(number)
            moved = dataclasses.replace(issue, number=next(target.numbers), milestone=None)
            moved.labels = self._attach(target, issue.labels)
            moved.updated_at = _now()
            target.issues[moved.number] = moved
            source.moved[number] = (target.id, moved.number)
            return moved.number

    def reset_rate_limit(self) -> None:
        """The hour is over: a new window with the whole quota."""
        with self._lock:
            self._window_reset = 0

    def add_label(self, full_name: str, number: int, name: str) -> None:
        """A maintainer labels the issue on github.com (creating the label if needed)."""
        with self._lock:
            repo = self._repos[full_name]
            issue = repo.issues[number]
            issue.labels = self._attach(repo, [*issue.labels, name])
            issue.updated_at = _now()

    # The HTTP side.

    def serve(self, method: str, target: str, authorization: str | None, body: bytes) -> _Reply:
        """Answer one request: record it, check the token, the quota and the secondary limits,
        then fail it if a fault matches. Every authenticated answer carries the rate limit
        headers."""
        with self._lock:
            self.requests.append((method, target))
            scheme, _, token = (authorization or "").partition(" ")
            caller = self._tokens.get(token) if scheme in ("token", "Bearer") else None
            if caller is None:
                return _error(401, "Bad credentials")
            quota = self._spend()
            if quota is None:
                return _primary_limit(403, self.rate_limit, self._window_reset)
            limited = self._secondary_limit(caller, method)
            if limited is not None:
                self.secondary_limited.append((method, urlsplit(target).path))
                status, payload, headers = limited
                return status, payload, {**quota, **headers}
            fault = self._take_fault(method, urlsplit(target).path)
            self._in_flight += 1
        try:
            status, payload, headers = self._answer(fault, method, target, body, caller)
        finally:
            with self._lock:
                self._in_flight -= 1
        return status, payload, {**quota, **headers}

    def _answer(self, fault: _Fault | None, method: str, target: str, body: bytes, caller: _User) -> _Reply:
        if fault is None:
            return self._route(method, target, body, caller)
        # The sleeps are outside the lock: other requests go on meanwhile.
        if fault.kind == "timeout_after_effect":
            reply = self._route(method, target, body, caller)
            time.sleep(fault.delay)
            return reply  # too late, unless the client waits longer than the delay
        if fault.kind == "server_error_after_effect":
            self._route(method, target, body, caller)
        if fault.kind == "timeout_before_effect":
            time.sleep(fault.delay)
        return _fault_reply(fault, self.rate_limit)

    def _secondary_limit(self, caller: _User, method: str) -> _Reply | None:
        """GitHub's 403 when the user has too many requests in flight, or too many writes in a
        window (Retry-After: until the oldest leaves it); a refused write is not counted."""
        if self._in_flight >= self.max_concurrent:
            return _error(403, SECONDARY_RATE_LIMIT)
        if method not in _WRITES:
            return None
        now = self.clock()
        sent = self._writes.setdefault(caller.login, deque())
        longest = max(window for _, window in self.write_limits)
        while sent and sent[0] <= now - longest:
            sent.popleft()
        for limit, window in self.write_limits:
            inside = [moment for moment in sent if moment > now - window]
            if len(inside) >= limit:
                wait = inside[-limit] + window - now
                return _error(403, SECONDARY_RATE_LIMIT, {"Retry-After": str(math.ceil(wait))})
        sent.append(now)
        return None

    def _spend(self) -> dict[str, str] | None:
        """Count the request against the hour's quota: its rate limit headers, or None when
        the quota was already used up (GitHub refuses before doing anything)."""
        now = int(time.time())
        if now >= self._window_reset:
            self._window_reset, self._used = now + RATE_WINDOW, 0
        if self._used >= self.rate_limit:
            return None
        self._used += 1
        return _rate_headers(self._used, self.rate_limit, self._window_reset)

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.method == method and fault.path.fullmatch(path):
                fault.times -= 1
                if fault.times == 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _route(self, method: str, target: str, body: bytes, caller: _User) -> _Reply:
        split = urlsplit(target)
        with self._lock:
            renamed = self._renamed_location(split.path, split.query)
            if renamed is not None:
                return _redirect(method, renamed)
            path = self._canonical(split.path)
            for verb, pattern, handler in self._routes:
                match = pattern.fullmatch(path)
                if verb != method or match is None:
                    continue
                try:
                    query = {name: values[-1] for name, values in parse_qs(split.query).items()}
                    request = _Request(split.path, query, _json_object(body), caller)
                    return handler(request, *map(unquote, match.groups()))
                except _HttpError as error:
                    return error.reply
                except _Moved as moved:
                    return self._moved(path, moved)
        return _error(404, "Not Found")

    def _renamed_location(self, path: str, query: str) -> str | None:
        """Where a request to a renamed repository's old name is sent: ``/repositories/{id}``."""
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        if match is None or unquote(match[1]) in self._repos or unquote(match[1]) not in self._renamed:
            return None
        return f"{self.url}/repositories/{self._renamed[unquote(match[1])]}{match[2] or ''}" + (f"?{query}" if query else "")

    def _canonical(self, path: str) -> str:
        """``/repositories/{id}/…`` (where a redirect points) is the repository's ``/repos/…``."""
        match = re.fullmatch(r"/repositories/(\d+)(/.*)?", path)
        if match is None:
            return path
        full_name = next((r.full_name for r in self._repos.values() if r.id == int(match[1])), None)
        return path if full_name is None else f"/repos/{full_name}{match[2] or ''}"

    def _moved(self, path: str, moved: _Moved) -> _Reply:
        """GitHub's 301 for a transferred issue: Location and the body's url say where it is."""
        rest = re.sub(r"^/repos/[^/]+/[^/]+/issues/\d+", "", path)
        location = f"{self.url}{moved.path}{rest}"
        payload = {"message": "Moved Permanently", "url": location, "documentation_url": REDIRECT_DOCS}
        return _reply(301, payload, {"Location": location})

    # Routes: each runs under the lock and returns the full reply.

    def _get_user(self, request: _Request) -> _Reply:
        return _reply(200, self._user_json(request.caller))

    def _get_repo(self, request: _Request, full_name: str) -> _Reply:
        repo = self._repo(full_name)
        permissions = {"admin": "admin", "maintain": "maintain", "push": "write", "triage": "triage", "pull": "read"}
        return _reply(200, {**self._repo_json(repo),
                            "permissions": {key: request.caller.may(repo, role) for key, role in permissions.items()}})

    def _list_issues(self, request: _Request, full_name: str) -> _Reply:
        repo = self._repo(full_name)
        query = request.query
        state = _choice(query, "state", ("open", "closed", "all"))
        sort = _choice(query, "sort", ("created", "updated"))
        descending = _choice(query, "direction", ("desc", "asc")) == "desc"
        wanted = {name.strip().casefold() for name in query.get("labels", "").split(",")} - {""}
        since = _since(query)
        creator = query.get("creator", "").casefold()
        chosen = [
            issue
            for issue in repo.issues.values()
            if state in ("all", issue.state)
            and wanted <= {name.casefold() for name in issue.labels}
            and (since is None or issue.updated_at >= since)
            and creator in ("", issue.user.login.casefold())
        ]
        chosen.sort(key=lambda issue: (getattr(issue, f"{sort}_at"), issue.number))
        if descending:
            chosen.reverse()
        return self._page(request, [self._issue_json(repo, issue) for issue in chosen])

    def _create_issue(self, request: _Request, full_name: str) -> _Reply:
        repo = self._repo(full_name)
        title = request.body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _invalid("Issue", "title", "missing_field")
        _check_length("Issue", "title", title, TITLE_LIMIT)
        _check_length("Issue", "body", request.body.get("body"), BODY_LIMIT)
        now = _now()
        issue = _Issue(
            id=next(self._ids),
            number=next(repo.numbers),
            title=title,
            body=request.body.get("body"),
            labels=[],
            created_at=now,
            updated_at=now,
            user=request.caller,
        )
        self._triage(repo, issue, request)
        repo.issues[issue.number] = issue
        return _reply(201, self._issue_json(repo, issue))

    def _get_issue(self, request: _Request, full_name: str, number: str) -> _Reply:
        repo = self._repo(full_name)
        return _reply(200, self._issue_json(repo, _issue(repo, number)))

    def _edit_issue(self, request: _Request, full_name: str, number: str) -> _Reply:
        repo = self._repo(full_name)
        issue = dataclasses.replace(_issue(repo, number))  # edit a copy: a 422 changes nothing
        changes = request.body
        author = issue.user.login == request.caller.login
        if not (author or request.caller.may(repo, "write")) and changes.keys() & {"title", "body"}:
            raise _NotAllowed
        if not (author or request.caller.may(repo, "triage")) and changes.keys() & {"state", "state_reason"}:
            raise _NotAllowed
        _check_length("Issue", "title", changes.get("title"), TITLE_LIMIT)
        _check_length("Issue", "body", changes.get("body"), BODY_LIMIT)
        if "title" in changes:
            issue.title = changes["title"]
        if "body" in changes:
            issue.body = changes["body"]
        self._triage(repo, issue, request)
        if "state" in changes or "state_reason" in changes:
            self._set_state(issue, changes.get("state", issue.state), changes.get("state_reason"))
        issue.updated_at = _now()
        repo.issues[issue.number] = issue
        return _reply(200, self._issue_json(repo, issue))

    def _list_comments(self, request: _Request, full_name: str, number: str) -> _Reply:
        return self._page(request, list(_issue(self._repo(full_name), number).comments))

    def _get_comment(self, request: _Request, full_name: str, comment_id: str) -> _Reply:
        return _reply(200, dict(_comment(self._repo(full_name), comment_id)))

    def _edit_comment(self, request: _Request, full_name: str, comment_id: str) -> _Reply:
        """Its author may edit a comment; someone else needs push access."""
        repo = self._repo(full_name)
        comment = _comment(repo, comment_id)
        if comment["user"]["login"] != request.caller.login and not request.caller.may(repo, "write"):
            raise _NotAllowed
        body = request.body.get("body")
        if not isinstance(body, str) or not body:
            raise _invalid("IssueComment", "body", "missing_field")
        _check_length("IssueComment", "body", body, BODY_LIMIT)
        comment.update(body=body, updated_at=_iso(_now()))
        return _reply(200, dict(comment))

    def _create_comment(self, request: _Request, full_name: str, number: str) -> _Reply:
        repo = self._repo(full_name)
        issue = _issue(repo, number)
        body = request.body.get("body")
        if not isinstance(body, str) or not body:
            raise _invalid("IssueComment", "body", "missing_field")
        _check_length("IssueComment", "body", body, BODY_LIMIT)
        comment_id = next(self._ids)
        issue_json = self._issue_json(repo, issue)
        now = _iso(_now())
        comment = {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "url": f"{self.url}/repos/{repo.full_name}/issues/comments/{comment_id}",
            "html_url": f"{issue_json['html_url']}#issuecomment-{comment_id}",
            "issue_url": issue_json["url"],
            "body": body,
            "user": self._user_json(request.caller),
            "created_at": now,
            "updated_at": now,
        }
        issue.comments.append(comment)
        issue.updated_at = _now()
        return _reply(201, comment)

    def _list_labels(self, request: _Request, full_name: str) -> _Reply:
        return self._page(request, list(self._repo(full_name).labels.values()))

    def _get_label(self, request: _Request, full_name: str, name: str) -> _Reply:
        label = _find_label(self._repo(full_name), name)
        if label is None:
            raise _HttpError(404, "Not Found")
        return _reply(200, label)

    def _get_milestone(self, request: _Request, full_name: str, number: str) -> _Reply:
        repo = self._repo(full_name)
        if int(number) not in repo.milestones:
            raise _HttpError(404, "Not Found")
        return _reply(200, self._milestone_json(repo, int(number)))

    def _create_label(self, request: _Request, full_name: str) -> _Reply:
        repo = self._repo(full_name)
        if not request.caller.may(repo, "write"):
            raise _NotAllowed
        name = request.body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _invalid("Label", "name", "missing_field")
        _check_length("Label", "name", name, LABEL_LIMIT)
        if _find_label(repo, name) is not None:
            raise _invalid("Label", "name", "already_exists")
        color = request.body.get("color", AUTO_LABEL_COLOR).removeprefix("#")
        label = self._new_label(repo, name, color, request.body.get("description"))
        return _reply(201, label)

    # Shared by the routes and the test-side methods; the lock is already held.

    def _repo(self, full_name: str) -> _Repo:
        if full_name not in self._repos:
            raise _HttpError(404, "Not Found")
        return self._repos[full_name]

    def _triage(self, repo: _Repo, issue: _Issue, request: _Request) -> None:
        """Set the labels, assignees and milestone the request names, if the caller may: without
        triage access GitHub drops them silently ("Only users with push access can set labels
        for new issues. Labels are silently dropped otherwise.")."""
        if not request.caller.may(repo, "triage"):
            return
        changes = request.body
        if "labels" in changes:
            issue.labels = self._attach(repo, changes["labels"])
        if "assignees" in changes:
            logins = {user.login for user in self._tokens.values()}
            names = changes["assignees"]
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise _invalid("Issue", "assignees")
            for name in names:
                if name not in logins:
                    raise _invalid("Issue", "assignees", value=name)
            issue.assignees = list(dict.fromkeys(names))
        if "milestone" in changes:
            milestone = changes["milestone"]
            if milestone is not None and milestone not in repo.milestones:
                raise _invalid("Issue", "milestone", value=milestone)
            issue.milestone = milestone

    def _attach(self, repo: _Repo, names: Any) -> list[str]:
        """Resolve label names against the repository, creating the missing ones as GitHub does
        (all checked first: a refused name creates none of them)."""
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise _invalid("Issue", "labels")
        for name in names:
            if len(name) > LABEL_LIMIT:
                error = {"value": name, "resource": "Label", "field": "name", "code": "invalid"}
                raise _HttpError(422, "Validation Failed", errors=[error])
        attached: list[str] = []
        for name in names:
            label = _find_label(repo, name) or self._new_label(repo, name, AUTO_LABEL_COLOR, None)
            if label["name"] not in attached:
                attached.append(label["name"])
        return attached

    def _new_label(
        self, repo: _Repo, name: str, color: str, description: str | None
    ) -> dict[str, Any]:
        label_id = next(self._ids)
        label = {
            "id": label_id,
            "node_id": f"LA_{label_id}",
            "url": f"{self.url}/repos/{repo.full_name}/labels/{quote(name, safe='')}",
            "name": name,
            "color": color,
            "description": description,
            "default": False,
        }
        repo.labels[name] = label
        return label

    def _set_state(self, issue: _Issue, state: Any, reason: Any) -> None:
        """Close or reopen as GitHub does: closing stamps closed_at, reopening says "reopened"."""
        if state not in ("open", "closed"):
            raise _invalid("Issue", "state")
        if reason is not None and reason not in _STATE_REASONS:
            raise _invalid("Issue", "state_reason")
        if state == "closed":
            if issue.state == "open":
                issue.closed_at = _now()
            issue.state_reason = reason or (
                issue.state_reason if issue.state == "closed" else "completed"
            )
        elif issue.state == "closed":
            issue.closed_at = None
            issue.state_reason = "reopened"
        issue.state = state
        issue.updated_at = _now()

    def _page(self, request: _Request, items: list[dict[str, Any]]) -> _Reply:
        """One page of `items`, with the Link header GitHub sends, pointing back at this fake."""
        per_page = min(_number(request.query, "per_page", 30), 100)
        page = _number(request.query, "page", 1)
        last = max(1, -(-len(items) // per_page))
        links: list[tuple[str, int]] = []
        if page > 1:
            links += [("prev", page - 1), ("first", 1)]
        if page < last:
            links += [("next", page + 1), ("last", last)]
        headers = {}
        if links:
            headers["Link"] = ", ".join(
                f'<{self.url}{request.path}?{urlencode({**request.query, "page": n})}>; rel="{rel}"'
                for rel, n in links
            )
        return _reply(200, items[(page - 1) * per_page : page * per_page], headers)

    def _user_json(self, user: _User) -> dict[str, Any]:
        return {
            "login": user.login,
            "id": user.id,
            "node_id": f"U_{user.id}",
            "type": "User",
            "url": f"{self.url}/users/{user.login}",
            "html_url": f"{self.url}/{user.login}",
        }

    def _milestone_json(self, repo: _Repo, number: int) -> dict[str, Any]:
        return {
            "number": number,
            "title": repo.milestones[number],
            "state": "open",
            "url": f"{self.url}/repos/{repo.full_name}/milestones/{number}",
        }

    def _repo_json(self, repo: _Repo) -> dict[str, Any]:
        owner, name = repo.full_name.split("/")
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": name,
            "full_name": repo.full_name,
            "owner": {"login": owner, "type": "Organization", "url": f"{self.url}/users/{owner}"},
            "url": api,
            "html_url": f"{self.url}/{repo.full_name}",
            "issues_url": f"{api}/issues{{/number}}",
            "labels_url": f"{api}/labels{{/name}}",
            "private": False,
            "has_issues": True,
        }

    def _issue_json(self, repo: _Repo, issue: _Issue) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        url = f"{api}/issues/{issue.number}"
        by_login = {user.login: user for user in self._tokens.values()}
        assignees = [self._user_json(by_login[login]) for login in issue.assignees]
        return {
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "labels": [dict(repo.labels[name]) for name in issue.labels],
            "user": self._user_json(issue.user),
            "assignee": assignees[0] if assignees else None,
            "assignees": assignees,
            "milestone": None if issue.milestone is None else self._milestone_json(repo, issue.milestone),
            "locked": False,
            "html_url": f"{self.url}/{repo.full_name}/issues/{issue.number}",
            "url": url,
            "repository_url": api,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "comments": len(issue.comments),
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at),
        }


def _fault_reply(fault: _Fault, limit: int) -> _Reply:
    """What a failed request gets back (after a timeout nobody is listening any more)."""
    if fault.kind == "timeout_before_effect":
        return _error(504, "We couldn't respond to your request in time.")
    if fault.kind in ("secondary_rate_limit", "rate_limit_429"):
        status = 403 if fault.kind == "secondary_rate_limit" else 429
        return _error(status, SECONDARY_RATE_LIMIT, {"Retry-After": str(fault.retry_after)})
    if fault.kind == "secondary_rate_limit_no_retry_after":
        return _error(403, SECONDARY_RATE_LIMIT)  # GitHub's rule then: wait at least a minute
    if fault.kind in ("primary_rate_limit", "primary_rate_limit_429"):
        status = 403 if fault.kind == "primary_rate_limit" else 429
        return _primary_limit(status, limit, int(time.time()) + fault.reset_in)
    if fault.kind in _REFUSALS:
        return _error(*_REFUSALS[fault.kind])
    if fault.kind == "validation_failed":  # one our checks did not foresee
        message = f"body is too long (maximum is {BODY_LIMIT} characters)"
        return _invalid("Issue", "body", "custom", message=message).reply
    return _error(502, "Server Error")


def _redirect(method: str, location: str) -> _Reply:
    """GitHub's redirect for a renamed repository: 301 to a read, 307 to anything else (a client
    must send the same request again, body and all, to ``location``)."""
    status, message = (301, "Moved Permanently") if method in ("GET", "HEAD") else (307, "Temporary Redirect")
    payload = {"message": message, "url": location, "documentation_url": REDIRECT_DOCS}
    return _reply(status, payload, {"Location": location})


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise _HttpError(400, "Problems parsing JSON")
    return parsed


def _issue(repo: _Repo, number: str) -> _Issue:
    if int(number) in repo.moved:
        raise _Moved(*repo.moved[int(number)])
    if int(number) not in repo.issues:
        raise _HttpError(404, "Not Found")
    return repo.issues[int(number)]


def _comment(repo: _Repo, comment_id: str) -> dict[str, Any]:
    found = next((c for issue in repo.issues.values() for c in issue.comments if c["id"] == int(comment_id)), None)
    if found is None:
        raise _HttpError(404, "Not Found")
    return found


def _find_label(repo: _Repo, name: str) -> dict[str, Any] | None:
    """GitHub matches label names case-insensitively ("Bug" finds "bug")."""
    return next(
        (label for key, label in repo.labels.items() if key.casefold() == name.casefold()), None
    )


def _choice(query: dict[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """A query parameter with a fixed set of values; the first is the default."""
    value = query.get(name, allowed[0])
    if value not in allowed:
        raise _invalid("Issue", name)
    return value


def _number(query: dict[str, str], name: str, default: int) -> int:
    value = query.get(name, str(default))
    if not value.isdigit() or int(value) < 1:
        raise _invalid("Issue", name)
    return int(value)


def _since(query: dict[str, str]) -> datetime | None:
    if "since" not in query:
        return None
    try:
        since = datetime.fromisoformat(query["since"])
    except ValueError:
        raise _invalid("Issue", "since") from None
    return since if since.tzinfo else since.replace(tzinfo=UTC)


class _Handler(BaseHTTPRequestHandler):
    """Moves bytes between the socket and `GitHubFake.serve`, keeping connections alive."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, each answer waits ~40 ms for an ACK.
    disable_nagle_algorithm = True
    server: _Server

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, payload, headers = self.server.fake.serve(
            self.command, self.path, self.headers.get("Authorization"), body
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    # PUT and DELETE too, so that they get the JSON 404 of an unknown route rather than a 501.
    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: a test run should not print a line per request."""


class _Server(ThreadingHTTPServer):
    """A thread per connection, so a handler sleeping through a fault stalls no other request."""

    daemon_threads = True
    fake: GitHubFake

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up on a slow answer is expected here, not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def running_github(token: str = "gh-test-token", clock: Callable[[], float] = time.monotonic) -> Iterator[GitHubFake]:
    """A fake GitHub on a free port of 127.0.0.1 for the duration of the block; ``clock`` times
    its secondary rate limit windows."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = GitHubFake(f"http://127.0.0.1:{server.server_port}", token, clock)
    # A short poll interval, because shutdown() waits for serve_forever to notice.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
