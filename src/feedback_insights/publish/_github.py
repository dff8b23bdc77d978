"""GitHub issues through PyGithub: filed exactly once, and their state read back.

Exactly once: PyGithub's own retry would repeat a ``POST /issues`` after a timeout or a 5xx
that may already have created the issue (measured against the fake: three issues from one
call). So PyGithub retries reads only, and :meth:`IssueTracker.file_once` retries creation
itself, looking first, before every attempt, for an issue that carries the cluster's marker
(the repository's issues with the marker label, listed, not searched: the search index lags).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import requests
from github import Auth, Github, GithubException, GithubRetry, UnknownObjectException
from github.Issue import Issue
from github.Repository import Repository

from ..config import GitHubConfig
from ..core import retry_after
from ..drafts import cluster_of

T = TypeVar("T")
LABEL_COLOUR = "c5def5"
#: The longest PyGithub may wait for a rate limit to reset before giving up (one clear error).
MAX_RATE_LIMIT_WAIT = 300
#: Methods PyGithub may repeat by itself: reads, and writes whose repetition changes nothing.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PATCH", "PUT", "DELETE"})


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


def _state(issue: Issue) -> IssueState:
    return IssueState(
        issue.number, issue.html_url, issue.state, issue.state_reason, [label.name for label in issue.labels], issue.closed_at
    )


class IssueTracker:
    def __init__(self, config: GitHubConfig, token: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.sleep = sleep
        self._github = Github(
            base_url=config.base_url,
            auth=Auth.Token(token),
            timeout=math.ceil(config.timeout),
            # other=0: urllib3 would otherwise repeat any method after an error it cannot classify
            # (an SSL error while reading the answer), POST included. raise_on_status=False: a
            # read that keeps failing ends as a GithubException with its status.
            retry=GithubRetry(
                total=config.retries, backoff_factor=config.backoff, allowed_methods=_IDEMPOTENT, other=0,
                raise_on_status=False, max_rate_limit_wait=MAX_RATE_LIMIT_WAIT,
            ),
            seconds_between_writes=config.seconds_between_writes or None,
            seconds_between_requests=None,
        )
        self._repos: dict[str, Repository] = {}
        self._labels: dict[str, set[str]] = {}
        self._marked: dict[str, dict[int, Issue]] = {}

    def close(self) -> None:
        self._github.close()

    def repo(self, name: str) -> Repository:
        if name not in self._repos:
            self._repos[name] = self._call(f"repository {name}", lambda: self._github.get_repo(name))
        return self._repos[name]

    def ensure_labels(self, repo_name: str, names: list[str]) -> None:
        """Create the labels the repository does not have yet."""
        repo = self.repo(repo_name)
        if repo_name not in self._labels:
            labels = self._call(f"labels of {repo_name}", lambda: list(repo.get_labels()))
            self._labels[repo_name] = {label.name.lower() for label in labels}
        for name in names:
            if name.lower() in self._labels[repo_name]:
                continue
            try:
                repo.create_label(name, LABEL_COLOUR, "added by feedback-insights")
            except GithubException as exc:
                if exc.status != 422:  # 422: it exists after all (created meanwhile)
                    raise GitHubError(f"{repo_name}: could not create label {name!r}: {_message(exc)}") from None
            except requests.RequestException as exc:
                raise GitHubError(f"{repo_name}: could not create label {name!r}: {type(exc).__name__}") from None
            self._labels[repo_name].add(name.lower())

    def find(self, repo_name: str, cluster_id: int, refresh: bool = False) -> Issue | None:
        """The issue already filed for ``cluster_id``, by its marker."""
        if refresh or repo_name not in self._marked:
            repo = self.repo(repo_name)
            issues = self._call(
                f"issues of {repo_name}",
                lambda: list(repo.get_issues(state="all", labels=[self.config.marker_label], sort="created", direction="asc")),
            )
            marked: dict[int, Issue] = {}
            for issue in issues:
                found = cluster_of(issue.body)
                if found is not None and found not in marked:  # the oldest, if there ever were two
                    marked[found] = issue
            self._marked[repo_name] = marked
        return self._marked[repo_name].get(cluster_id)

    def file_once(self, repo_name: str, cluster_id: int, title: str, body: str, labels: list[str]) -> tuple[IssueState, bool]:
        """The cluster's issue and whether this call created it. A timeout, a rate limit or a
        5xx is retried with backoff, and every retry first looks for what the failed attempt
        may have created, so the issue exists once however the network behaves."""
        labels = list(dict.fromkeys([*labels, self.config.marker_label]))
        self.ensure_labels(repo_name, labels)
        repo = self.repo(repo_name)
        for attempt in range(self.config.retries + 1):
            existing = self.find(repo_name, cluster_id, refresh=attempt > 0)
            if existing is not None:
                return _state(existing), False
            try:
                issue = repo.create_issue(title=title, body=body, labels=labels)
            except (requests.Timeout, requests.ConnectionError) as exc:
                failure, wait = f"{type(exc).__name__}", self.config.backoff * 2**attempt
            except GithubException as exc:
                if not _retryable(exc):
                    raise GitHubError(f"{repo_name}: GitHub refused the issue ({exc.status}): {_message(exc)}") from None
                failure = f"{exc.status}"
                wait = retry_after((exc.headers or {}).get("retry-after"), 300.0) or self.config.backoff * 2**attempt
            else:
                self._marked.setdefault(repo_name, {})[cluster_id] = issue
                return _state(issue), True
            if attempt < self.config.retries:
                self.sleep(wait)
        raise GitHubError(f"{repo_name}: could not file cluster {cluster_id} after {self.config.retries + 1} tries (last: {failure})")

    def comment_once(self, repo_name: str, number: int, marker: str, body: str) -> bool:
        """Post ``body`` on the issue unless a comment already carries ``marker``; whether it
        posted. Not retried here: a lost answer is found by the next run's look first."""
        repo = self.repo(repo_name)
        issue = self._call(f"issue {repo_name}#{number}", lambda: repo.get_issue(number))
        comments = self._call(f"comments of {repo_name}#{number}", lambda: list(issue.get_comments()))
        if any(marker in (comment.body or "") for comment in comments):
            return False
        try:
            issue.create_comment(body)
        except GithubException as exc:
            raise GitHubError(f"{repo_name}#{number}: GitHub refused the comment ({exc.status}): {_message(exc)}") from None
        except requests.RequestException as exc:
            raise GitHubError(f"{repo_name}#{number}: the comment may not have been posted: {type(exc).__name__}") from None
        return True

    def state(self, repo_name: str, number: int) -> IssueState:
        repo = self.repo(repo_name)
        return _state(self._call(f"issue {repo_name}#{number}", lambda: repo.get_issue(number)))

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """A read, with PyGithub's retries; its failure as one :class:`GitHubError` line."""
        try:
            return fn()
        except UnknownObjectException:
            raise GitHubError(f"{what}: not found on {self.config.base_url} (check the name and the token's access)") from None
        except GithubException as exc:
            raise GitHubError(f"{what}: GitHub answered {exc.status}: {_message(exc)}") from None
        except requests.RequestException as exc:
            raise GitHubError(f"{what}: {self.config.base_url} could not be reached: {type(exc).__name__}") from None


def _retryable(exc: GithubException) -> bool:
    if exc.status == 429 or exc.status >= 500:
        return True
    return exc.status == 403 and ("retry-after" in (exc.headers or {}) or "rate limit" in _message(exc).lower())


def _message(exc: GithubException) -> str:
    data = exc.data
    return str(data.get("message", data)) if isinstance(data, dict) else str(data)
