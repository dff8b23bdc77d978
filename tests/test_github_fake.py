"""The GitHub fake, driven by real PyGithub calls, behaves as the publisher's tests rely on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from github import (
    Auth,
    BadCredentialsException,
    Github,
    GithubException,
    UnknownObjectException,
)
from github.Repository import Repository

from .github_fake import GitHubFake, running_github

REPO = "acme/api"
ISSUES = r"/repos/acme/api/issues"


@pytest.fixture
def fake() -> Iterator[GitHubFake]:
    with running_github() as fake:
        fake.add_repo(REPO)
        yield fake


def client(fake: GitHubFake, token: str | None = None, **settings: Any) -> Github:
    """PyGithub with a 1 s timeout and no retries or throttling: faults surface, tests stay fast."""
    return Github(
        base_url=fake.url,
        auth=Auth.Token(token or fake.token),
        timeout=1,
        retry=None,
        seconds_between_requests=0,
        seconds_between_writes=0,
        **settings,
    )


@pytest.fixture
def repo(fake: GitHubFake) -> Repository:
    return client(fake).get_repo(REPO)


def test_get_repo_and_user(fake: GitHubFake) -> None:
    gh = client(fake)
    repo = gh.get_repo(REPO)
    assert (repo.full_name, repo.name, repo.owner.login) == (REPO, "api", "acme")
    assert repo.url == f"{fake.url}/repos/{REPO}"
    assert gh.get_user().login == "feedback-bot"
    assert fake.requests == [("GET", "/repos/acme/api"), ("GET", "/user")]
    with pytest.raises(UnknownObjectException):
        gh.get_repo("acme/nope")


def test_create_issue_creates_the_issue_and_its_labels(fake: GitHubFake, repo: Repository) -> None:
    issue = repo.create_issue("Search is slow", body="p95 is 4s", labels=["feedback", "perf"])
    assert issue.number == 1
    assert issue.html_url == f"{fake.url}/acme/api/issues/1"
    assert [label.name for label in issue.labels] == ["feedback", "perf"]
    assert sorted(fake.labels(REPO)) == ["feedback", "perf"]
    assert repo.create_issue("Another", labels=["Feedback"]).number == 2  # case-insensitive
    assert sorted(fake.labels(REPO)) == ["feedback", "perf"]

    stored = fake.issues(REPO)
    assert [(i["number"], i["title"], i["state"]) for i in stored] == [
        (1, "Search is slow", "open"),
        (2, "Another", "open"),
    ]
    assert stored[0]["body"] == "p95 is 4s"
    assert stored[0]["url"] == f"{fake.url}/repos/acme/api/issues/1"
    assert "pull_request" not in stored[0]
    assert fake.requests[-2:] == [("POST", "/repos/acme/api/issues")] * 2


def test_get_issues_filters_and_follows_the_link_header(fake: GitHubFake) -> None:
    repo = client(fake, per_page=2).get_repo(REPO)
    for n in range(1, 8):
        repo.create_issue(f"issue {n}", labels=["feedback", "perf"] if n % 2 else ["feedback"])
    fake.close_issue(REPO, 3)
    del fake.requests[:]

    both = repo.get_issues(state="all", labels=["feedback", "perf"])
    assert [issue.number for issue in both] == [7, 5, 3, 1]
    assert fake.requests == [
        ("GET", "/repos/acme/api/issues?labels=feedback%2Cperf&per_page=2&state=all"),
        ("GET", "/repos/acme/api/issues?labels=feedback%2Cperf&page=2&per_page=2&state=all"),
    ]
    assert [i.number for i in repo.get_issues(labels=["feedback", "perf"])] == [7, 5, 1]
    assert [i.number for i in repo.get_issues(state="closed")] == [3]
    oldest_first = repo.get_issues(state="all", sort="created", direction="asc")
    assert [issue.number for issue in oldest_first] == [1, 2, 3, 4, 5, 6, 7]
    assert repo.get_issues(state="all").totalCount == 7  # read off rel="last"


def test_labels(fake: GitHubFake) -> None:
    repo = client(fake, per_page=2).get_repo(REPO)
    with pytest.raises(UnknownObjectException):
        repo.get_label("needs triage")
    created = repo.create_label("needs triage", "ff0000", "Waiting for a human")
    assert created.url == f"{fake.url}/repos/acme/api/labels/needs%20triage"
    label = repo.get_label("needs triage")
    assert (label.name, label.color, label.description) == (
        "needs triage",
        "ff0000",
        "Waiting for a human",
    )
    with pytest.raises(GithubException) as raised:
        repo.create_label("Needs Triage", "00ff00")
    assert raised.value.status == 422
    repo.create_label("feedback", "0000ff")
    repo.create_label("perf", "0000ff")
    assert [label.name for label in repo.get_labels()] == ["needs triage", "feedback", "perf"]
    assert fake.labels(REPO)["feedback"]["color"] == "0000ff"


def test_edits_and_maintainer_actions_round_trip(fake: GitHubFake, repo: Repository) -> None:
    issue = repo.create_issue("Export times out")
    issue.edit(state="closed", state_reason="not_planned")
    assert (issue.state, issue.state_reason) == ("closed", "not_planned")
    fetched = repo.get_issue(1)
    assert (fetched.state, fetched.state_reason) == ("closed", "not_planned")
    assert fetched.closed_at is not None

    fake.reopen_issue(REPO, 1)
    fetched = repo.get_issue(1)
    assert (fetched.state, fetched.state_reason, fetched.closed_at) == ("open", "reopened", None)

    fake.close_issue(REPO, 1, "completed")
    fake.add_label(REPO, 1, "duplicate")
    fetched = repo.get_issue(1)
    assert (fetched.state, fetched.state_reason) == ("closed", "completed")
    assert [label.name for label in fetched.labels] == ["duplicate"]
    assert "duplicate" in fake.labels(REPO)

    fetched.create_comment("Seen again by 3 more agents")
    assert repo.get_issue(1).comments == 1
    assert fake.issues(REPO)[0]["comments"] == 1


def test_timeout_after_effect_times_out_but_the_issue_exists(
    fake: GitHubFake, repo: Repository
) -> None:
    fake.fail("POST", ISSUES, "timeout_after_effect", delay=1.5)
    with pytest.raises(requests.exceptions.Timeout):
        repo.create_issue("Filed once?")
    started = time.monotonic()
    # The fake is still sleeping on the POST; other requests are answered meanwhile.
    assert [issue.title for issue in repo.get_issues()] == ["Filed once?"]
    assert time.monotonic() - started < 0.5


def test_timeout_before_effect_times_out_and_nothing_happens(
    fake: GitHubFake, repo: Repository
) -> None:
    fake.fail("POST", ISSUES, "timeout_before_effect", delay=1.5)
    with pytest.raises(requests.exceptions.Timeout):
        repo.create_issue("Lost")
    assert fake.issues(REPO) == []
    assert repo.create_issue("Retried").number == 1


def test_secondary_rate_limit(fake: GitHubFake, repo: Repository) -> None:
    fake.fail("POST", ISSUES, "secondary_rate_limit", retry_after=7)
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Too fast")
    assert raised.value.status == 403
    assert raised.value.headers["retry-after"] == "7"  # PyGithub lower-cases header names
    assert "secondary rate limit" in raised.value.data["message"]
    assert fake.issues(REPO) == []
    assert repo.create_issue("Later").number == 1  # the fault was used up


def test_rate_limit_429(fake: GitHubFake, repo: Repository) -> None:
    fake.fail("POST", ISSUES, "rate_limit_429")
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Too fast")
    assert (raised.value.status, raised.value.headers["retry-after"]) == (429, "1")
    assert fake.issues(REPO) == []


def test_server_error_has_no_effect(fake: GitHubFake, repo: Repository) -> None:
    fake.fail("POST", ISSUES, "server_error", times=2)
    for _ in range(2):
        with pytest.raises(GithubException) as raised:
            repo.create_issue("Unlucky")
        assert raised.value.status == 502
    assert fake.issues(REPO) == []
    assert repo.create_issue("Third time").number == 1


def test_server_error_after_effect(fake: GitHubFake, repo: Repository) -> None:
    fake.fail("POST", ISSUES, "server_error_after_effect")
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Filed anyway")
    assert raised.value.status == 502
    assert [issue["title"] for issue in fake.issues(REPO)] == ["Filed anyway"]


def test_faults_match_method_and_the_path_without_query(fake: GitHubFake, repo: Repository) -> None:
    fake.fail("GET", ISSUES, "server_error")
    repo.create_issue("A POST is not a GET")
    with pytest.raises(GithubException):
        list(repo.get_issues(state="all", labels=["x"]))
    assert [issue.number for issue in repo.get_issues()] == [1]
    with pytest.raises(ValueError):
        fake.fail("GET", ISSUES, "gremlins")


def test_bad_token_and_unknown_routes(fake: GitHubFake) -> None:
    with pytest.raises(BadCredentialsException):
        client(fake, token="stolen").get_repo(REPO)
    assert fake.requests == [("GET", "/repos/acme/api")]
    with pytest.raises(UnknownObjectException):
        client(fake).get_repo(REPO).get_issue(9)
    with pytest.raises(UnknownObjectException):
        client(fake).get_user("octocat")
