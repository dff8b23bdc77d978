"""The GitHub fake, driven by real PyGithub calls, behaves as the publisher's tests rely on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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

from .github_fake import WRITE_LIMITS, GitHubFake, VirtualClock, running_github

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


# Tokens and their access: GitHub drops what a token may not set, silently.

READER = "gh-reader-token"


@pytest.fixture
def reader(fake: GitHubFake) -> Repository:
    """The repository as a token with read access only sees it (an outside contributor's)."""
    fake.add_token(READER, "outsider", role="read")
    return client(fake, token=READER).get_repo(REPO)


def test_labels_assignees_and_milestone_are_dropped_silently_without_triage_access(
    fake: GitHubFake, repo: Repository, reader: Repository
) -> None:
    repo.create_label("feedback", "0000ff")
    milestone = fake.add_milestone(REPO, "v2")
    assert (reader.permissions.pull, reader.permissions.triage, reader.permissions.push) == (True, False, False)
    assert (repo.permissions.push, repo.permissions.admin) == (True, True)

    dropped = reader.create_issue("Filed from outside", body="b", labels=["feedback", "new-one"],
                                  assignees=["feedback-bot"], milestone=repo.get_milestone(milestone))
    assert dropped.number == 1 and dropped.labels == [] and dropped.assignees == [] and dropped.milestone is None
    assert dropped.user.login == "outsider"
    dropped.edit(body="edited by its author", labels=["feedback"])
    [stored] = fake.issues(REPO)
    assert (stored["body"], stored["labels"], stored["assignees"], stored["milestone"]) == ("edited by its author", [], [], None)
    assert sorted(fake.labels(REPO)) == ["feedback"]  # "new-one" was not created either

    fake.grant(READER, REPO, "triage")  # triage may label, assign and set milestones
    kept = client(fake, token=READER).get_repo(REPO).create_issue(
        "Filed by a triager", labels=["feedback"], assignees=["feedback-bot"], milestone=repo.get_milestone(milestone))
    assert [label.name for label in kept.labels] == ["feedback"]
    assert [user.login for user in kept.assignees] == ["feedback-bot"] and kept.milestone.number == milestone
    with pytest.raises(GithubException) as raised:
        repo.create_issue("Unknown assignee", assignees=["nobody"])
    assert _validation_errors(raised) == [{"resource": "Issue", "code": "invalid", "field": "assignees", "value": "nobody"}]


def test_without_push_access_labels_cannot_be_created_nor_others_issues_edited(
    fake: GitHubFake, repo: Repository, reader: Repository
) -> None:
    theirs = repo.create_issue("Filed by the maintainer")
    with pytest.raises(UnknownObjectException):  # GitHub hides what a token may not change
        reader.create_label("feedback", "0000ff")
    with pytest.raises(UnknownObjectException):
        reader.get_issue(theirs.number).edit(body="rewritten by a stranger")
    assert fake.labels(REPO) == {} and fake.issues(REPO)[0]["body"] is None
    reader.get_issue(theirs.number).create_comment("anyone may comment")
    assert len(fake.comments(REPO, theirs.number)) == 1


def test_issues_can_be_listed_by_their_creator(fake: GitHubFake, repo: Repository, reader: Repository) -> None:
    repo.create_issue("ours")
    reader.create_issue("theirs")
    fake.close_issue(REPO, 2)
    assert [i.title for i in repo.get_issues(state="all", creator="outsider")] == ["theirs"]
    assert [i.title for i in repo.get_issues(state="all", creator="feedback-bot")] == ["ours"]
    assert [i.title for i in repo.get_issues(creator="outsider")] == []  # open ones only, by default


def test_a_renamed_repository_answers_301_to_reads_and_307_to_writes(fake: GitHubFake, repo: Repository) -> None:
    repo.create_issue("Before the rename")
    fake.rename_repo(REPO, "acme/api-v2")
    moved = f"{fake.url}/repositories/{fake.repo_id('acme/api-v2')}"
    auth = {"Authorization": f"token {fake.token}"}

    read = requests.get(f"{fake.url}/repos/{REPO}/issues?state=all", headers=auth, allow_redirects=False, timeout=1)
    assert read.status_code == 301 and read.headers["Location"] == f"{moved}/issues?state=all"
    assert read.json()["message"] == "Moved Permanently"
    write = requests.post(f"{fake.url}/repos/{REPO}/issues", json={"title": "After"}, headers=auth,
                          allow_redirects=False, timeout=1)
    assert write.status_code == 307 and write.headers["Location"] == f"{moved}/issues"
    assert write.json()["message"] == "Temporary Redirect" and fake.issues("acme/api-v2")[-1]["number"] == 1

    followed = requests.post(f"{fake.url}/repos/{REPO}/issues", json={"title": "After"}, headers=auth, timeout=1)
    assert followed.status_code == 201 and followed.json()["repository_url"] == f"{fake.url}/repos/acme/api-v2"
    renamed = client(fake).get_repo(REPO)  # PyGithub follows the 301
    assert renamed.full_name == "acme/api-v2" and [i.number for i in renamed.get_issues(state="all")] == [2, 1]
    # ... and not the 307: a Repository read before the rename takes the redirect's answer for
    # the created issue, which does not exist. The publisher follows 307s itself.
    assert repo.create_issue("Lost").number is None
    assert [i["title"] for i in fake.issues("acme/api-v2")] == ["Before the rename", "After"]


def test_comments_over_65536_characters_are_refused_and_their_author_may_edit_them(
    fake: GitHubFake, repo: Repository, reader: Repository
) -> None:
    issue = repo.create_issue("Comments")
    with pytest.raises(GithubException) as raised:
        issue.create_comment("c" * 65_537)
    assert _validation_errors(raised) == [
        {"resource": "IssueComment", "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"}
    ]
    comment = issue.create_comment("c" * 65_536)  # at the limit
    comment.edit("shorter")
    assert fake.requests[-1] == ("PATCH", f"/repos/{REPO}/issues/comments/{comment.id}")
    assert issue.get_comment(comment.id).body == "shorter"
    with pytest.raises(GithubException) as raised:
        comment.edit("c" * 65_537)
    assert _validation_errors(raised)[0]["resource"] == "IssueComment"
    with pytest.raises(UnknownObjectException):  # someone else's comment, without push access
        reader.get_issue(issue.number).get_comment(comment.id).edit("vandalised")
    fake.edit_comment(REPO, comment.id, "tidied by a maintainer")
    [stored] = fake.comments(REPO, issue.number)
    assert stored["body"] == "tidied by a maintainer" and stored["user"]["login"] == "feedback-bot"


def test_write_bursts_meet_the_secondary_rate_limits() -> None:
    """GitHub: at most 80 content-creating requests a minute and 500 an hour; over either, a 403
    saying "secondary rate limit" with Retry-After, and nothing done. Reads are not limited."""
    assert WRITE_LIMITS == ((80, 60.0), (500, 3600.0))
    clock = VirtualClock()
    with running_github(clock=clock.now) as fake:
        fake.add_repo(REPO)
        session = requests.Session()
        session.headers["Authorization"] = f"token {fake.token}"

        def post() -> requests.Response:
            return session.post(f"{fake.url}/repos/{REPO}/issues", json={"title": "burst"}, timeout=1)

        assert all(post().status_code == 201 for _ in range(80))
        clock.sleep(20)
        refused = post()
        assert refused.status_code == 403 and "secondary rate limit" in refused.json()["message"]
        assert refused.headers["Retry-After"] == "40"  # when the first of the minute's 80 leaves it
        assert int(refused.headers["X-RateLimit-Remaining"]) > 0  # not the primary limit
        assert session.get(f"{fake.url}/repos/{REPO}", timeout=1).status_code == 200
        assert len(fake.issues(REPO)) == 80 and fake.secondary_limited == [("POST", f"/repos/{REPO}/issues")]

        # The hour's window, with the limits scaled down (GitHub's: 500 an hour); the 80 count.
        fake.write_limits = ((8, 60.0), (100, 3600.0))
        for _ in range(2):
            clock.sleep(60)
            assert all(post().status_code == 201 for _ in range(8))
        clock.sleep(60)
        assert all(post().status_code == 201 for _ in range(4))
        clock.sleep(60)
        refused = post()
        assert refused.status_code == 403 and int(refused.headers["Retry-After"]) == 3600 - 20 - 4 * 60
        assert len(fake.issues(REPO)) == 100


def test_too_many_concurrent_requests_meet_the_secondary_rate_limit(fake: GitHubFake) -> None:
    fake.max_concurrent = 2
    fake.fail("GET", r"/repos/acme/api", "timeout_after_effect", times=2, delay=1.0)  # two slow answers
    auth = {"Authorization": f"token {fake.token}"}
    with ThreadPoolExecutor(2) as pool:
        slow = [pool.submit(requests.get, f"{fake.url}/repos/{REPO}", headers=auth, timeout=5) for _ in range(2)]
        while len(fake.requests) < 2:  # both are being answered
            time.sleep(0.01)
        third = requests.get(f"{fake.url}/repos/{REPO}/labels", headers=auth, timeout=5)
        assert [f.result().status_code for f in slow] == [200, 200]
    assert third.status_code == 403 and "secondary rate limit" in third.json()["message"]
    assert requests.get(f"{fake.url}/repos/{REPO}/labels", headers=auth, timeout=5).status_code == 200
