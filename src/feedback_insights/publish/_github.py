"""GitHub issues through PyGithub: filed exactly once, and their state read back.

Exactly once: PyGithub's own retry would repeat a ``POST /issues`` after a timeout or a 5xx
that may already have created the issue (measured against the fake: three issues from one
call). So PyGithub retries reads only, and :meth:`IssueTracker.file_once` retries creation
itself, looking first, before every attempt, for an issue that carries the cluster's marker
line. It looks among the repository's issues *listed* (not searched: the search index lags),
twice filtered: the ones the token's own account opened, and the ones with the marker label.
Not by the label alone: GitHub drops labels silently when the token's user has no triage
access to the repository, and a maintainer may remove them; each retry then filed one more
issue. Not by the marker alone: anyone may open an issue that carries it, and only our own
account, or someone who may label issues, makes one we adopt.

GitHub's rules, for reads and writes alike (its REST docs, "Best practices" and "Rate limits"):

- what GitHub would refuse is not sent: a title over 256 characters is shortened, a body or a
  comment over 65,536 or a label name over 50 is one error line; without triage access no
  labels are sent (GitHub would drop them), without push access none is created;
- a refusal no retry changes (a 403 that is no rate limit, 404, 410, 422) is one line naming
  the repository and what to fix, and is never retried;
- writes are paced (:mod:`._pacing`): ``seconds_between_writes`` apart and within GitHub's
  secondary limits, ``writes_per_minute`` and ``writes_per_hour``;
- a rate limit is waited for: ``Retry-After`` when sent; else, with ``X-RateLimit-Remaining:
  0``, until ``X-RateLimit-Reset``; else at least a minute, longer at each try. The waits go
  through the tracker's ``sleep`` (tests record them), at most :data:`MAX_RATE_LIMIT_WAIT`
  each: a longer one is an error, and no request is made until it has passed (an integration
  that keeps asking while limited may be banned);
- a redirect is followed: 301 (a transferred issue; a renamed repository, to reads) by PyGithub,
  307 (a renamed repository, to writes) here, as PyGithub would take the redirect's own answer
  for the created issue.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

import requests
from github import Auth, Github, GithubException
from github.Issue import Issue
from github.Repository import Repository
from requests.adapters import Retry  # urllib3's, through requests (PyGithub's transport)

from ..config import GitHubConfig
from ..core import retry_after
from ..drafts import cluster_of, neutralise
from ._pacing import Pacer

T = TypeVar("T")
LABEL_COLOUR = "c5def5"
#: GitHub's limits, in characters: anything longer is answered 422.
TITLE_LIMIT = 256
BODY_LIMIT = 65_536
LABEL_LIMIT = 50
#: The longest wait for a rate limit before giving up (one clear error).
MAX_RATE_LIMIT_WAIT = 300
#: GitHub's rule for a rate limit that says neither Retry-After nor when it resets: a minute.
SECONDARY_RATE_WAIT = 60
#: Methods PyGithub may repeat by itself: reads, and writes whose repetition changes nothing.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PATCH", "PUT", "DELETE"})
#: Redirects of one write followed before giving up.
MAX_REDIRECTS = 3


class GitHubError(RuntimeError):
    """GitHub refused, or kept failing after the retries; the message says which and where."""


@dataclass(frozen=True, slots=True)
class IssueState:
    number: int
    url: str
    state: str  # open | closed
    state_reason: str | None
    labels: list[str]
    closed_at: datetime | None
    #: owner/name of the repository the issue is in now (a transferred issue moved).
    repo: str | None = None

    def known_status(self, status_labels: Mapping[str, str]) -> str:
        """The AFP known_issue status: closed as completed → fixed, as not planned → wont_fix;
        an open issue is planned / in_progress when it carries a mapped label."""
        if self.state == "closed":
            # A duplicate is tracked by another issue: still known, not fixed.
            return {"not_planned": "wont_fix", "duplicate": "acknowledged"}.get(self.state_reason or "", "fixed")
        wanted = {name.lower(): status for name, status in status_labels.items()}
        mapped = {wanted[name.lower()] for name in self.labels if name.lower() in wanted}
        for status in ("in_progress", "planned"):
            if status in mapped:
                return status
        return "acknowledged"


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment as GitHub holds it now."""

    id: int
    body: str
    url: str


def _state(issue: Issue) -> IssueState:
    return IssueState(
        issue.number, issue.html_url, issue.state, issue.state_reason, [label.name for label in issue.labels], issue.closed_at,
        "/".join(urlsplit(issue.repository_url).path.split("/")[-2:]),
    )


class _ReadRetry(Retry):
    """urllib3's retry of reads after connection errors, timeouts and 5xx, waiting through the
    tracker's ``sleep``. Not of rate limits: PyGithub's GithubRetry would wait for those itself,
    with real sleeps and for reads only, so a 403 or 429 comes back to :class:`IssueTracker`,
    which waits by GitHub's rules for reads and writes alike."""

    #: A Retry-After makes urllib3 retry a 503 only: a 429 is a rate limit, ours to wait for.
    RETRY_AFTER_STATUS_CODES = frozenset({503})

    def __init__(self, pause: Callable[[float], None] = time.sleep, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pause = pause

    def new(self, **kwargs: Any) -> Self:
        return super().new(pause=self.pause, **kwargs)

    def sleep(self, response: Any = None) -> None:
        after = retry_after(response.headers.get("Retry-After"), MAX_RATE_LIMIT_WAIT) if response is not None else None
        wait = after or self.get_backoff_time()
        if wait > 0:
            self.pause(wait)


@dataclass(frozen=True, slots=True)
class _Limit:
    """A rate limit: how long GitHub asks us to wait, and the words for an error line."""

    wait: float
    reason: str


def _rate_limit(exc: GithubException, attempt: int) -> _Limit | None:
    """The wait GitHub's rules ask for after this answer, or None when it is no rate limit:
    Retry-After when sent; else, with no request remaining, until X-RateLimit-Reset (UTC epoch
    seconds; one more, as it is not said when in that second it resets); else, for a 429 or a
    403 that says "rate limit", at least a minute, doubled at each further try."""
    if exc.status not in (403, 429):
        return None
    headers = exc.headers or {}  # PyGithub lower-cases their names
    after = retry_after(headers.get("retry-after"), math.inf)
    if after:
        return _Limit(after, f"GitHub asks for no request ({exc.status} with Retry-After)")
    reset = retry_after(headers.get("x-ratelimit-reset"), math.inf)
    if headers.get("x-ratelimit-remaining") == "0" and reset:
        return _Limit(max(reset - time.time(), 0.0) + 1, "GitHub's rate limit for this token is used up")
    if exc.status == 429 or "rate limit" in _message(exc).lower():
        return _Limit(min(SECONDARY_RATE_WAIT * 2**attempt, MAX_RATE_LIMIT_WAIT), "GitHub's secondary rate limit holds")
    return None


def _refusal(repo: str, exc: GithubException) -> str:
    """What GitHub refused, and what to fix, for an answer no retry changes."""
    status, message = exc.status, _message(exc)
    if status == 403:
        return f'GitHub refused the token (403 {message}): give it the permission "Issues: write" on {repo}'
    if status == 404:
        return (f"not found (404 {message}): check that {repo} is the repository's name in [github] repos or "
                "default_repo, and that the token can see it")
    if status == 410 and "disabled" in message.lower():
        return (f"issues are disabled on {repo} (410 {message}): enable Issues in its settings, or map the service "
                "to another repository in [github] repos")
    if status == 422:
        return f"GitHub found it invalid (422 {message}): {_invalid_fields(exc)}"
    return f"GitHub answered {status}: {message}"


def _invalid_fields(exc: GithubException) -> str:
    """A 422's errors, each as "Resource field: message" (or its code when it has none)."""
    errors = exc.data.get("errors") if isinstance(exc.data, dict) else None
    found = [
        f"{error.get('resource', '')} {error.get('field', '?')}: {error.get('message') or error.get('code', 'invalid')}"
        for error in errors or [] if isinstance(error, dict)
    ]
    return "; ".join(text.strip() for text in found) or "no details given"


def _already_exists(exc: GithubException) -> bool:
    return exc.status == 422 and "already_exists" in _invalid_fields(exc)


def _fit_title(title: str) -> str:
    """A title GitHub takes: one too long is shortened, with an ellipsis, rather than refused."""
    return neutralise.truncate(title, TITLE_LIMIT)


def _check_fits(repo: str, body: str, labels: list[str]) -> None:
    """A body or label name GitHub would refuse is one error line; they are not sent. Neither is
    cut here: the body is the drafts stage's (it keeps to 60,000) or a maintainer's edit, and a
    shortened label would be another label."""
    if len(body) > BODY_LIMIT:
        raise GitHubError(
            f"{repo}: the body is {len(body):,} characters, GitHub takes at most {BODY_LIMIT:,}: shorten it (drafts edit)"
        )
    for label in labels:
        if len(label) > LABEL_LIMIT:
            raise GitHubError(
                f"{repo}: the label {label!r} is {len(label)} characters, GitHub takes at most {LABEL_LIMIT}: "
                "shorten it (drafts edit, or [drafts] labels)"
            )


class IssueTracker:
    def __init__(
        self, config: GitHubConfig, token: str, *, sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``sleep`` and ``clock`` time the waits (tests pass a clock of their own)."""
        self.config = config
        self.sleep = sleep
        self.clock = clock
        self._github = Github(
            base_url=config.base_url,
            auth=Auth.Token(token),
            timeout=math.ceil(config.timeout),
            # other=0: urllib3 would otherwise repeat any method after an error it cannot classify
            # (an SSL error while reading the answer), POST included. raise_on_status=False: a
            # read that keeps failing ends as a GithubException with its status.
            retry=_ReadRetry(
                sleep, total=config.retries, backoff_factor=config.backoff, allowed_methods=_IDEMPOTENT, other=0,
                status_forcelist=range(500, 600), raise_on_status=False,
            ),
            per_page=100,
            # Writes are paced by the tracker (_write), through its clock.
            seconds_between_writes=None,
            seconds_between_requests=None,
        )
        self._pacer = Pacer(config.seconds_between_writes,
                            ((config.writes_per_minute, 60.0), (config.writes_per_hour, 3600.0)))
        self._repos: dict[str, Repository] = {}
        self._labels: dict[str, set[str]] = {}
        self._marked: dict[str, dict[int, Issue]] = {}
        #: Until when GitHub asked for no request (UTC epoch seconds), and why.
        self._held: tuple[float, str] | None = None
        #: One line per repository where labels are left off, and why.
        self.notes: list[str] = []

    def close(self) -> None:
        self._github.close()

    def repo(self, name: str) -> Repository:
        if name not in self._repos:
            self._repos[name] = self._call(name, f"repository {name}", lambda: self._github.get_repo(name))
        return self._repos[name]

    @functools.cached_property
    def login(self) -> str | None:
        """The token's account: the issues and comments it wrote are ours. None when GitHub will
        not say (a GitHub App's installation token may not read ``/user``; an app with
        "Issues: write" can label, so its issues are found by their label)."""
        return self._call(self.config.base_url, "the token's account", self._read_login)

    def _read_login(self) -> str | None:
        try:
            return self._github.get_user().login
        except GithubException as exc:
            if exc.status == 403 and _rate_limit(exc, 0) is None:
                return None
            raise

    def labels_for(self, repo_name: str, names: list[str]) -> list[str]:
        """``names`` as an issue on the repository can carry them, the missing ones created.
        Without triage access none: GitHub would drop them silently. Without push access only
        those the repository has: creating one would be refused. Each is one line in
        :attr:`notes`."""
        repo = self.repo(repo_name)
        permissions = repo.permissions  # the token's user's role; None when GitHub does not say
        if permissions is not None and not (permissions.triage or permissions.push):
            self._note(f"labels on {repo_name}: the token has no triage access there (GitHub would drop them): "
                       "issues are filed without labels, and found again by their author and marker")
            return []
        if repo_name not in self._labels:
            labels = self._call(repo_name, f"labels of {repo_name}", lambda: list(repo.get_labels()))
            self._labels[repo_name] = {label.name.lower() for label in labels}
        missing = [name for name in names if name.lower() not in self._labels[repo_name]]
        if missing and permissions is not None and not permissions.push:
            self._note(f"labels on {repo_name}: the token may not create {', '.join(missing)} there (no push access): "
                       "issues are filed without them")
            return [name for name in names if name not in missing]
        for name in missing:
            what = f"{repo_name}: label {name!r}"
            self._call(repo_name, what, functools.partial(self._create_label, repo_name, what, name))
            self._labels[repo_name].add(name.lower())
        return names

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def find(self, repo_name: str, cluster_id: int, refresh: bool = False) -> Issue | None:
        """The issue already filed for ``cluster_id``: the oldest with its marker line among
        the issues the token's account opened and those with the marker label."""
        if refresh or repo_name not in self._marked:
            repo = self.repo(repo_name)
            filters: list[dict[str, Any]] = [{"labels": [self.config.marker_label]}]
            if self.login is not None:
                filters.append({"creator": self.login})
            issues = [issue for kept in filters
                      for issue in self._call(repo_name, f"issues of {repo_name}", functools.partial(_listed, repo, kept))]
            marked: dict[int, Issue] = {}
            for issue in sorted(issues, key=lambda issue: issue.number):
                found = cluster_of(issue.body)
                if found is not None and issue.pull_request is None:
                    marked.setdefault(found, issue)  # the oldest, if there ever were two
            self._marked[repo_name] = marked
        return self._marked[repo_name].get(cluster_id)

    def file_once(self, repo_name: str, cluster_id: int, title: str, body: str, labels: list[str]) -> tuple[IssueState, bool]:
        """The cluster's issue and whether this call created it. A timeout, a rate limit or a
        5xx is retried, and every retry first looks for what the failed attempt may have
        created, so the issue exists once however the network behaves. What GitHub would
        refuse is not sent (a long title is shortened)."""
        title = _fit_title(title)
        labels = list(dict.fromkeys([*labels, self.config.marker_label]))
        _check_fits(repo_name, body, labels)
        labels = self.labels_for(repo_name, labels)
        for attempt in range(self.config.retries + 1):
            existing = self.find(repo_name, cluster_id, refresh=attempt > 0)
            if existing is not None:
                return _state(existing), False
            url = f"{self.repo(repo_name).url}/issues"
            try:
                data = self._write(repo_name, f"{repo_name}: filing cluster {cluster_id}", "POST", url,
                                   {"title": title, "body": body, "labels": labels})
            except (requests.Timeout, requests.ConnectionError) as exc:
                failure, wait = f"{type(exc).__name__}", self.config.backoff * 2**attempt
            except GithubException as exc:
                failure, wait = self._not_created(repo_name, exc, attempt)
            else:
                issue = self._github.create_from_raw_data(Issue, data)
                self._marked.setdefault(repo_name, {})[cluster_id] = issue
                return _state(issue), True
            if attempt < self.config.retries:
                self.sleep(wait)
        raise GitHubError(f"{repo_name}: could not file cluster {cluster_id} after {self.config.retries + 1} tries (last: {failure})")

    def _not_created(self, repo_name: str, exc: GithubException, attempt: int) -> tuple[str, float]:
        """Why creating failed and how long to wait before the next try; a refusal no retry
        changes raises."""
        limit = _rate_limit(exc, attempt)
        if limit is not None:
            return f"{exc.status} rate limit", self._bounded(repo_name, limit)
        if exc.status >= 500:
            return f"{exc.status}", self.config.backoff * 2**attempt
        raise GitHubError(f"{repo_name}: {_refusal(repo_name, exc)}") from None

    def comments(self, repo_name: str, number: int) -> list[Comment]:
        """The issue's comments written by the token's account, oldest first (every comment
        when GitHub will not say which account the token is: see :attr:`login`)."""
        return self._ours(repo_name, self._issue(repo_name, number))

    def _ours(self, repo_name: str, issue: Issue) -> list[Comment]:
        listed = self._call(repo_name, f"comments of {repo_name}#{issue.number}", lambda: list(issue.get_comments()))
        login = (self.login or "").lower()
        return [Comment(c.id, c.body or "", c.html_url) for c in listed
                if not login or (c.user is not None and c.user.login.lower() == login)]

    def comment_once(self, repo_name: str, number: int, marker: str, body: str) -> tuple[Comment, bool]:
        """Post ``body`` on the issue unless one of our comments already carries ``marker``:
        the comment, and whether this call posted it. Not retried here: a lost answer is found
        by the next run's look first."""
        where = f"{repo_name}#{number}"
        _check_comment(where, body, "not posted")
        issue = self._issue(repo_name, number)
        for comment in self._ours(repo_name, issue):
            if marker in comment.body:
                return comment, False
        url = f"{issue.url}/comments"
        try:
            data = self._write(repo_name, where, "POST", url, {"body": body})
        except GithubException as exc:
            if _rate_limit(exc, 0) is not None:
                raise GitHubError(f"{where}: rate limited ({exc.status}); the next run posts it") from None
            raise GitHubError(f"{where}: the comment was not posted: {_refusal(repo_name, exc)}") from None
        except requests.RequestException as exc:
            raise GitHubError(f"{where}: the comment may not have been posted: {type(exc).__name__}") from None
        return Comment(data["id"], data.get("body") or "", data.get("html_url") or ""), True

    def edit_comment(self, repo_name: str, comment_id: int, body: str) -> None:
        """Set one of our comments' body (a PATCH: safe to repeat)."""
        where = f"{repo_name} comment {comment_id}"
        _check_comment(where, body, "not edited")
        url = f"{self.repo(repo_name).url}/issues/comments/{comment_id}"
        self._call(repo_name, f"editing {where}", lambda: self._write(repo_name, where, "PATCH", url, {"body": body}))

    def body(self, repo_name: str, number: int) -> str:
        """The issue's body as it is on GitHub now (a maintainer may have edited it)."""
        return self._issue(repo_name, number).body or ""

    def replace_body(self, repo_name: str, number: int, body: str) -> None:
        """Set the issue's body (a PATCH: safe to repeat)."""
        _check_fits(repo_name, body, [])
        issue = self._issue(repo_name, number)
        what = f"editing {repo_name}#{number}"
        self._call(repo_name, what, lambda: self._write(repo_name, what, "PATCH", issue.url, {"body": body}))

    def close_as_duplicate(self, repo_name: str, number: int) -> IssueState:
        """Close the issue with the state reason ``duplicate`` (a PATCH: safe to repeat). GitHub's
        REST API takes the reason but not which issue it duplicates: the "Duplicate of #N"
        comment says that (:meth:`comment_once`). An issue closed already keeps its reason."""
        issue = self._issue(repo_name, number)
        if issue.state != "open":
            return _state(issue)
        what = f"closing {repo_name}#{number}"
        closed = self._call(repo_name, what, lambda: self._write(
            repo_name, what, "PATCH", issue.url, {"state": "closed", "state_reason": "duplicate"}))
        return _state(self._github.create_from_raw_data(Issue, closed))

    def state(self, repo_name: str, number: int) -> IssueState:
        """The issue's state; a transferred issue's (the 301 is followed), with where it is now."""
        return _state(self._issue(repo_name, number))

    def _issue(self, repo_name: str, number: int) -> Issue:
        repo = self.repo(repo_name)
        return self._call(repo_name, f"issue {repo_name}#{number}", lambda: repo.get_issue(number))

    def _create_label(self, repo_name: str, what: str, name: str) -> None:
        """Create the label; one that exists after all (created meanwhile) is as good."""
        url = f"{self.repo(repo_name).url}/labels"
        try:
            self._write(repo_name, what, "POST", url, {"name": name, "color": LABEL_COLOUR,
                                                       "description": "added by feedback-insights"})
        except GithubException as exc:
            if not _already_exists(exc):
                raise

    def _write(self, repo_name: str, what: str, verb: str, url: str, payload: dict[str, Any]) -> Any:
        """Send one write, paced, through PyGithub's requester (its authentication, transport
        and 301s); its JSON answer. A 307 is followed with the same request, as GitHub asks of
        clients for a renamed repository, and the repository is looked up again afterwards, so
        that reads go to its new name (PyGithub follows a read's 301 without its query).
        An error answer raises as PyGithub raises it."""
        requester = self._github.requester
        for _ in range(MAX_REDIRECTS + 1):
            self._pace(what)
            status, headers, output = requester.requestJson(verb, url, input=payload)
            data = _parsed(output)
            location = headers.get("location")
            if status in (307, 308) and location:
                url = self._followable(what, location)
                self._repos.pop(repo_name, None)
                continue
            if status >= 300:
                raise requester.createException(status, headers, data)
            return data
        raise GitHubError(f"{what}: GitHub redirected it more than {MAX_REDIRECTS} times")

    def _followable(self, what: str, location: str) -> str:
        """A redirect's target, when it is on the configured host: the token goes with it."""
        to, base = urlsplit(location), urlsplit(self.config.base_url)
        if (to.scheme, to.netloc) != (base.scheme, base.netloc):
            raise GitHubError(f"{what}: GitHub redirected it to {to.scheme}://{to.netloc}, not {self.config.base_url}: "
                              "not followed (the token would go along); check [github] base_url")
        return location

    def _pace(self, what: str) -> None:
        """Wait until the next write may go (:class:`~._pacing.Pacer`); a wait over
        :data:`MAX_RATE_LIMIT_WAIT` holds every further request and raises."""
        self._check_held(what)
        wait, limit = self._pacer.wait(self.clock())
        self._bounded(what, _Limit(wait, f"{limit} holds for this run's writes"))  # raises when too long
        if wait > 0:
            self.sleep(wait)
        self._pacer.sent(self.clock())

    def _call(self, repo_name: str, what: str, fn: Callable[[], T]) -> T:
        """A request (a read is retried by PyGithub after transport errors and 5xx), again
        after a rate limit; its failure as one :class:`GitHubError` line."""
        for attempt in range(self.config.retries + 1):
            self._check_held(what)
            try:
                return fn()
            except GithubException as exc:
                limit = _rate_limit(exc, attempt)
                if limit is None:
                    raise GitHubError(f"{what}: {_refusal(repo_name, exc)}") from None
                status = exc.status
            except requests.RequestException as exc:
                raise GitHubError(f"{what}: {self.config.base_url} could not be reached: {type(exc).__name__}") from None
            wait = self._bounded(what, limit)
            if attempt < self.config.retries:
                self.sleep(wait)
        raise GitHubError(f"{what}: still rate limited after {self.config.retries + 1} tries (last: {status})")

    def _bounded(self, what: str, limit: _Limit) -> float:
        """The wait, when it is within :data:`MAX_RATE_LIMIT_WAIT`. A longer one holds every
        further request until it has passed, and raises."""
        if limit.wait <= MAX_RATE_LIMIT_WAIT:
            return limit.wait
        self._held = (time.time() + limit.wait, limit.reason)
        raise GitHubError(self._held_line(what))

    def _check_held(self, what: str) -> None:
        if self._held is not None and time.time() < self._held[0]:
            raise GitHubError(self._held_line(what))
        self._held = None

    def _held_line(self, what: str) -> str:
        assert self._held is not None
        until, reason = self._held
        moment = datetime.fromtimestamp(until, UTC)
        return (
            f"{what}: {reason} until {moment:%H:%M:%S} UTC, {until - time.time():.0f} s from now "
            f"(publishing waits at most {MAX_RATE_LIMIT_WAIT} s): run it again after then"
        )


def _listed(repo: Repository, filters: dict[str, Any]) -> list[Issue]:
    """Every issue of the repository that matches ``filters``, open or closed, oldest first."""
    return list(repo.get_issues(state="all", sort="created", direction="asc", **filters))


def _check_comment(where: str, body: str, outcome: str) -> None:
    """A comment GitHub would refuse is one error line; it is not sent."""
    if len(body) > BODY_LIMIT:
        raise GitHubError(f"{where}: the comment is {len(body):,} characters, GitHub takes at most {BODY_LIMIT:,}: {outcome}")


def _parsed(output: str) -> Any:
    """A write's answer as JSON; one that is not JSON (a proxy's error page) as its message."""
    try:
        return json.loads(output) if output else {}
    except ValueError:
        return {"message": output[:200]}


def _message(exc: GithubException) -> str:
    data = exc.data
    return str(data.get("message", data)) if isinstance(data, dict) else str(data)
