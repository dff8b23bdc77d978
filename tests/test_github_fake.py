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
    RateLimitExceededException,
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


# Strict where GitHub is strict: its validation, its refusals, its redirects and rate limits.


def _validation_errors(raised: pytest.ExceptionInfo[GithubException]) -> list[dict[str, Any]]:
    assert raised.value.status == 422 and raised.value.data["message"] == "Validation Failed"
    assert raised.value.data["documentation_url"].startswith("https://docs.github.com/")
    return raised.value.data["errors"]


def test_titles_bodies_and_label_names_over_githubs_limits_are_refused(
    fake: GitHubFake, repo: Repository
) -> None:
    with pytest.raises(GithubException) as raised:
        repo.create_issue("t" * 257)
    assert _validation_errors(raised) == [
        {"resource": "Issue", "code": "custom", "field": "title",
         "message": "title is too long (maximum is 256 characters)"}
    ]
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Long body", body="b" * 65_537)
    assert _validation_errors(raised) == [
        {"resource": "Issue", "code": "custom", "field": "body",
         "message": "body is too long (maximum is 65536 characters)"}
    ]
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Long label", labels=["l" * 51])
    assert _validation_errors(raised) == [
        {"value": "l" * 51, "resource": "Label", "field": "name", "code": "invalid"}
    ]
    with pytest.raises(GithubException) as raised:
        repo.create_label("l" * 51, "ff0000")
    assert _validation_errors(raised) == [
        {"resource": "Label", "code": "custom", "field": "name",
         "message": "name is too long (maximum is 50 characters)"}
    ]
    assert fake.issues(REPO) == [] and fake.labels(REPO) == {}

    issue = repo.create_issue("t" * 256, body="b" * 65_536, labels=["l" * 50])  # at the limits
    with pytest.raises(GithubException) as raised:
        issue.edit(title="t" * 257)
    assert _validation_errors(raised)[0]["field"] == "title"
    assert fake.issues(REPO)[0]["title"] == "t" * 256


@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [
        ("integration_forbidden", 403, "Resource not accessible by integration"),
        ("repo_not_found", 404, "Not Found"),
        ("issues_disabled", 410, "Issues are disabled for this repo"),
        ("validation_failed", 422, "Validation Failed"),
    ],
)
def test_refusals_can_be_injected(
    fake: GitHubFake, repo: Repository, kind: str, status: int, message: str
) -> None:
    fake.fail("POST", ISSUES, kind)
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Refused")
    assert (raised.value.status, raised.value.data["message"]) == (status, message)
    assert not isinstance(raised.value, RateLimitExceededException)  # nothing to wait for
    assert "retry-after" not in raised.value.headers
    assert isinstance(raised.value, UnknownObjectException) == (status == 404)
    if kind == "validation_failed":
        assert raised.value.data["errors"][0]["field"] == "body"
    assert fake.issues(REPO) == []
    assert repo.create_issue("Accepted").number == 1


def test_normal_answers_carry_the_rate_limit_headers(fake: GitHubFake) -> None:
    url, auth = f"{fake.url}/repos/{REPO}", {"Authorization": f"token {fake.token}"}
    first = requests.get(url, headers=auth, timeout=1).headers
    second = requests.get(url, headers=auth, timeout=1).headers
    assert first["X-RateLimit-Limit"] == "5000" and first["X-RateLimit-Resource"] == "core"
    assert (first["X-RateLimit-Used"], first["X-RateLimit-Remaining"]) == ("1", "4999")
    assert (second["X-RateLimit-Used"], second["X-RateLimit-Remaining"]) == ("2", "4998")
    reset = int(first["X-RateLimit-Reset"])  # UTC epoch seconds: the window's end
    assert 3500 < reset - time.time() <= 3600 and second["X-RateLimit-Reset"] == str(reset)
    gh = client(fake)
    gh.get_repo(REPO)
    assert gh.rate_limiting == (4997, 5000) and gh.rate_limiting_resettime == reset


@pytest.mark.parametrize(("kind", "status"), [("primary_rate_limit", 403), ("primary_rate_limit_429", 429)])
def test_a_primary_rate_limit_says_when_it_resets_and_nothing_else(
    fake: GitHubFake, repo: Repository, kind: str, status: int
) -> None:
    fake.fail("POST", ISSUES, kind, reset_in=40)
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Over the limit")
    headers = raised.value.headers
    assert raised.value.status == status
    assert raised.value.data["message"].startswith("API rate limit exceeded for user ID 1.")
    assert isinstance(raised.value, RateLimitExceededException) == (status == 403)  # PyGithub's mapping
    assert headers["x-ratelimit-remaining"] == "0" and headers["x-ratelimit-used"] == headers["x-ratelimit-limit"]
    assert 38 <= int(headers["x-ratelimit-reset"]) - time.time() <= 40
    assert "retry-after" not in headers  # GitHub sends none with a primary limit
    assert fake.issues(REPO) == []


def test_a_secondary_rate_limit_may_come_without_retry_after(fake: GitHubFake, repo: Repository) -> None:
    fake.fail("POST", ISSUES, "secondary_rate_limit_no_retry_after")
    with pytest.raises(RateLimitExceededException) as raised:
        repo.create_issue("Too fast")
    assert raised.value.status == 403 and "secondary rate limit" in raised.value.data["message"]
    assert "retry-after" not in raised.value.headers
    assert int(raised.value.headers["x-ratelimit-remaining"]) > 0  # not the primary limit
    assert fake.issues(REPO) == []


def test_using_up_the_quota_is_refused_until_the_window_resets(fake: GitHubFake) -> None:
    fake.rate_limit = 3
    gh = client(fake)
    repo = gh.get_repo(REPO)
    repo.create_issue("Second request")
    assert gh.rate_limiting == (1, 3)
    repo.get_issue(1)
    with pytest.raises(RateLimitExceededException) as raised:
        repo.get_issue(1)
    assert raised.value.headers["x-ratelimit-remaining"] == "0"
    assert int(raised.value.headers["x-ratelimit-reset"]) - time.time() > 3500
    fake.reset_rate_limit()
    assert repo.get_issue(1).number == 1


def test_a_transferred_issue_answers_301_and_pygithub_follows_it(fake: GitHubFake, repo: Repository) -> None:
    fake.add_repo("acme/elsewhere")
    repo.create_issue("Wrong repository")
    repo.create_issue("Stays")
    number = fake.transfer_issue(REPO, 1, "acme/elsewhere")
    assert number == 1 and [i["title"] for i in fake.issues("acme/elsewhere")] == ["Wrong repository"]
    assert [i["number"] for i in fake.issues(REPO)] == [2]

    answer = requests.get(
        f"{fake.url}/repos/{REPO}/issues/1",
        headers={"Authorization": f"token {fake.token}"}, allow_redirects=False, timeout=1,
    )
    moved = f"{fake.url}/repositories/{fake.repo_id('acme/elsewhere')}/issues/1"
    assert answer.status_code == 301 and answer.headers["Location"] == moved
    assert answer.json()["message"] == "Moved Permanently" and answer.json()["url"] == moved

    del fake.requests[:]
    issue = repo.get_issue(1)
    assert fake.requests == [
        ("GET", "/repos/acme/api/issues/1"), ("GET", f"/repositories/{fake.repo_id('acme/elsewhere')}/issues/1")
    ]
    assert (issue.title, issue.repository_url) == ("Wrong repository", f"{fake.url}/repos/acme/elsewhere")
    assert issue.html_url == f"{fake.url}/acme/elsewhere/issues/1"
    issue.create_comment("Followed")
    assert [c["body"] for c in fake.comments("acme/elsewhere", 1)] == ["Followed"]
    assert [i.number for i in repo.get_issues(state="all")] == [2]
