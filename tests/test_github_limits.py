"""Publishing against a GitHub that is as strict as GitHub: its validation limits, its refusals,
its redirects and its rate limits, each injected on the real fake server PyGithub talks to.

Whatever the fault, filing stays exactly once: every test ends with one issue per cluster.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from feedback_insights.config import Config, GitHubConfig
from feedback_insights.drafts import cluster_of, get_draft, marker
from feedback_insights.publish import GitHubError, IssueTracker, PublishRun, publish
from feedback_insights.publish._github import MAX_RATE_LIMIT_WAIT
from feedback_insights.warehouse import Warehouse

from . import test_publish
from .github_fake import GitHubFake, VirtualClock, running_github
from .test_drafts import _grow
from .test_publish import ISSUES, Clock, _all_issues, _config, _tracker

# The fixtures of the publishing tests: the fake with the sample's repositories, and a copy of
# the clustered sample with its first three drafts approved.
github = test_publish.github
drafted = test_publish.drafted

LABELS = r"/repos/[^/]+/[^/]+/labels"
REPO = r"/repos/[^/]+/[^/]+"


def _first(config: Config, wh: Warehouse) -> tuple[int, str]:
    """The first approved draft (the one whose request a fault hits) and its repository."""
    draft_id, service = wh.con.execute(
        "SELECT d.id, c.service FROM drafts d JOIN clusters c ON c.id = d.cluster_id WHERE d.status = 'approved' ORDER BY d.id"
    ).fetchall()[0]
    repo = config.github.repo_for(service)
    assert repo is not None
    return draft_id, repo


def _sent(gh: GitHubFake, method: str, path: str) -> list[int]:
    """Where in the request log the requests matching method and path are."""
    return [i for i, (verb, target) in enumerate(gh.requests) if verb == method and re.fullmatch(path, urlsplit(target).path)]


def _filed_exactly_once(gh: GitHubFake, count: int = 3, *also: str) -> None:
    issues = _all_issues(gh) + [issue for repo in also for issue in gh.issues(repo)]
    assert len(issues) == count and len({cluster_of(issue["body"]) for issue in issues}) == count


def _publish(config: Config, path: Path, clock: Clock | None = None) -> PublishRun:
    with Warehouse(path) as wh:
        return publish(config, wh, _tracker(config, clock), {})


def _one_line(run: PublishRun, draft_id: int, repo: str) -> str:
    [error] = run.errors
    assert error.startswith(f"draft {draft_id}: ") and repo in error and "\n" not in error
    return error


# Validation: what GitHub would refuse is not sent as is.


def test_a_title_over_256_characters_is_filed_shortened_with_an_ellipsis(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    title = "Pagination cursor resets " * 20  # 500 characters
    with Warehouse(drafted) as wh:
        draft_id, _ = _first(config, wh)
        wh.con.execute("UPDATE drafts SET title = ? WHERE id = ?", [title, draft_id])
        run = publish(config, wh, _tracker(config), {})
        filed = get_draft(wh, draft_id)
    assert run.errors == [] and len(run.filed) == 3
    [issue] = [i for i in github.issues(filed["repo"]) if i["number"] == filed["issue_number"]]
    assert len(issue["title"]) <= 256 and issue["title"].endswith("…")
    assert title.startswith(issue["title"].removesuffix("…")) and len(issue["title"]) > 200
    _filed_exactly_once(github)


@pytest.mark.parametrize(("what", "words"), [("body", ["body", "65,536", "drafts edit"]), ("label", ["label", "60", "50", "drafts edit"])])
def test_a_body_or_label_github_would_refuse_is_one_error_line_and_never_sent(
    github: GitHubFake, drafted: Path, what: str, words: list[str]
) -> None:
    config = _config(drafted, github)
    long_label = "l" * 60
    with Warehouse(drafted) as wh:
        draft_id, repo = _first(config, wh)
        if what == "body":
            wh.con.execute("UPDATE drafts SET body = body || repeat('x', 70000) WHERE id = ?", [draft_id])
        else:
            wh.con.execute("UPDATE drafts SET labels = list_append(labels, ?) WHERE id = ?", [long_label, draft_id])
        run = publish(config, wh, _tracker(config), {})
        assert get_draft(wh, draft_id)["status"] == "approved"
    error = _one_line(run, draft_id, repo)
    assert all(word in error for word in words), error
    assert len(_sent(github, "POST", ISSUES)) == 2 and len(_all_issues(github)) == 2
    assert all(long_label not in github.labels(name) for name in ("acme/companies-api", "orbit/mcp", "pags/console"))


def test_a_422_that_still_happens_names_the_field_and_is_not_retried(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.fail("POST", ISSUES, "validation_failed")
    with Warehouse(drafted) as wh:
        draft_id, repo = _first(config, wh)
        run = publish(config, wh, _tracker(config), {})
        assert get_draft(wh, draft_id)["status"] == "approved"
    error = _one_line(run, draft_id, repo)
    assert "422" in error and "body: body is too long (maximum is 65536 characters)" in error
    assert len(_sent(github, "POST", ISSUES)) == 3  # the refused one was sent once
    assert len(_publish(config, drafted).filed) == 1
    _filed_exactly_once(github)


# Refusals no retry can change: one line naming the repository and what to fix.


@pytest.mark.parametrize(
    ("method", "path", "kind", "fix"),
    [
        ("POST", ISSUES, "integration_forbidden", 'the permission "Issues: write"'),
        ("POST", LABELS, "integration_forbidden", 'the permission "Issues: write"'),
        ("POST", ISSUES, "repo_not_found", "[github] repos"),
        ("GET", REPO, "repo_not_found", "[github] repos"),
        ("POST", ISSUES, "issues_disabled", "enable Issues"),
        ("GET", ISSUES, "issues_disabled", "enable Issues"),
    ],
)
def test_a_refusal_is_one_line_saying_what_to_fix_and_is_never_retried(
    github: GitHubFake, drafted: Path, method: str, path: str, kind: str, fix: str
) -> None:
    config = _config(drafted, github)
    github.fail(method, path, kind)
    clock = Clock()
    with Warehouse(drafted) as wh:
        draft_id, repo = _first(config, wh)
        run = publish(config, wh, _tracker(config, clock), {})
        assert get_draft(wh, draft_id)["status"] == "approved"
    error = _one_line(run, draft_id, repo)
    assert fix in error, error
    assert _sent(github, method, path) and clock.waits == []
    # The fault is one-shot: a retry would have got through and filed the draft after all.
    assert len(_all_issues(github)) == 2
    again = _publish(config, drafted)  # fixed: the next run files the one that was refused
    assert again.errors == [] and len(again.filed) == 1
    _filed_exactly_once(github)


# Redirects.


def test_a_transferred_issue_is_followed_and_its_new_home_remembered(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.add_repo("acme/elsewhere")
    with Warehouse(drafted) as wh:
        publish(config, wh, _tracker(config), {})
        draft = wh.con.sql("SELECT * FROM drafts WHERE status = 'filed' AND drafted_by <> 'hand' ORDER BY id LIMIT 1").pl().to_dicts()[0]
        number = github.transfer_issue(draft["repo"], draft["issue_number"], "acme/elsewhere")
        github.close_issue("acme/elsewhere", number, "completed")
        _grow(wh, draft["cluster_id"], draft["accounts"])
        run = publish(config, wh, _tracker(config), {})
        moved = get_draft(wh, draft["id"])
        assert publish(config, wh, _tracker(config), {}).status_changes == []
    assert run.errors == [] and (draft["id"], "acknowledged", "fixed") in run.status_changes
    assert ("GET", f"/repositories/{github.repo_id('acme/elsewhere')}/issues/{number}") in github.requests  # the 301, followed
    assert (moved["repo"], moved["issue_number"], moved["issue_url"]) == (
        "acme/elsewhere", number, f"{github.url}/acme/elsewhere/issues/{number}"
    )
    assert run.updates == [(draft["id"], draft["accounts"] * 2)]
    assert len(github.comments("acme/elsewhere", number)) == 1  # the demand update went to its new home
    _filed_exactly_once(github, 3, "acme/elsewhere")


# Rate limits, by GitHub's rules: Retry-After if sent; else X-RateLimit-Reset when the remaining
# quota is 0; else at least a minute.


@pytest.mark.parametrize("kind", ["primary_rate_limit", "primary_rate_limit_429"])
def test_a_primary_rate_limit_on_filing_is_waited_for_until_it_resets(github: GitHubFake, drafted: Path, kind: str) -> None:
    config = _config(drafted, github)
    github.fail("POST", ISSUES, kind, reset_in=40)
    clock = Clock()
    run = _publish(config, drafted, clock)
    assert run.errors == [] and len(run.filed) == 3
    [wait] = clock.waits
    assert 39 <= wait <= 42  # until X-RateLimit-Reset, and a second more
    _filed_exactly_once(github)


@pytest.mark.parametrize(("method", "path"), [("POST", ISSUES), ("GET", ISSUES)])
def test_a_primary_rate_limit_beyond_the_bound_is_one_clear_error_and_no_more_requests(
    github: GitHubFake, drafted: Path, method: str, path: str
) -> None:
    config = _config(drafted, github)
    github.fail(method, path, "primary_rate_limit", reset_in=3600)
    clock = Clock()
    with Warehouse(drafted) as wh:
        draft_id, repo = _first(config, wh)
        run = publish(config, wh, _tracker(config, clock), {})
    assert clock.waits == []  # nobody waits an hour
    assert run.errors and run.errors[0].startswith(f"draft {draft_id}: ") and repo in run.errors[0]
    assert all("rate limit" in e and "used up until" in e and "UTC" in e and f"{MAX_RATE_LIMIT_WAIT} s" in e for e in run.errors)
    limited = _sent(github, method, path)[-1]
    assert limited == len(github.requests) - 1  # nothing was sent after it
    assert _all_issues(github) == []
    assert _publish(config, drafted).errors == []  # an hour later
    _filed_exactly_once(github)


def test_a_secondary_rate_limit_without_retry_after_waits_at_least_a_minute(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.fail("POST", ISSUES, "secondary_rate_limit_no_retry_after", times=2)
    clock = Clock()
    run = _publish(config, drafted, clock)
    assert run.errors == [] and len(run.filed) == 3
    assert len(clock.waits) == 2 and clock.waits[0] >= 60 and clock.waits[1] > clock.waits[0]  # then longer
    _filed_exactly_once(github)


@pytest.mark.parametrize(
    ("kind", "least", "most"),
    [("primary_rate_limit", 3, 6), ("primary_rate_limit_429", 3, 6), ("secondary_rate_limit_no_retry_after", 60, MAX_RATE_LIMIT_WAIT)],
)
def test_reads_wait_for_rate_limits_through_the_trackers_clock(
    github: GitHubFake, drafted: Path, kind: str, least: float, most: float
) -> None:
    config = _config(drafted, github)
    github.fail("GET", ISSUES, kind, reset_in=3)
    clock = Clock()
    run = _publish(config, drafted, clock)
    assert run.errors == [] and len(run.filed) == 3
    [wait] = clock.waits
    assert least <= wait <= most
    _filed_exactly_once(github)


def test_reads_retried_after_a_5xx_wait_through_the_trackers_clock_too(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.fail("GET", ISSUES, "server_error", times=2)
    clock = Clock()
    run = _publish(config, drafted, clock)
    assert run.errors == [] and len(run.filed) == 3
    assert clock.waits and all(wait < 1 for wait in clock.waits)  # the backoff, recorded, not slept
    _filed_exactly_once(github)


def test_a_used_up_quota_stops_the_run_with_one_line_per_draft_and_files_once_later(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.rate_limit = 9  # runs out while filing: the first draft takes eight requests
    clock = Clock()
    run = _publish(config, drafted, clock)
    assert clock.waits == [] and run.errors and len(run.filed) >= 1
    assert all("used up until" in e and "\n" not in e for e in run.errors)
    assert len(github.requests) == 10  # after the first refusal, no request more
    github.rate_limit = 5000
    github.reset_rate_limit()  # the hour is over
    again = _publish(config, drafted)
    assert again.errors == [] and len(run.filed) + len(again.filed) + len(again.adopted) == 3
    _filed_exactly_once(github)


# A renamed repository: GitHub answers writes 307, which PyGithub does not follow.


def _bare_tracker(gh: GitHubFake, clock: VirtualClock | None = None, **settings: object) -> IssueTracker:
    """A tracker on the fake alone (no warehouse): GitHub's pacing on unless ``settings`` say otherwise."""
    config = GitHubConfig(base_url=gh.url, token_env="FI_TEST_GITHUB_TOKEN", timeout=1, backoff=0.05, **settings)
    clock = clock or VirtualClock()
    return IssueTracker(config, gh.token, sleep=clock.sleep, clock=clock.now)


def _body(cluster_id: int) -> str:
    return f"{marker(cluster_id)}\nAgents reported cluster {cluster_id}.\n"


def test_writes_to_a_repository_renamed_during_the_run_follow_the_307_once() -> None:
    with running_github() as gh:
        gh.add_repo("acme/api")
        tracker = _bare_tracker(gh)
        first, _ = tracker.file_once("acme/api", 1, "Before", _body(1), [])
        gh.rename_repo("acme/api", "acme/api-v2")  # the repository was looked up before this
        state, created = tracker.file_once("acme/api", 2, "After", _body(2), [])
        _, posted = tracker.comment_once("acme/api", first.number, "<!-- x -->", "<!-- x -->\nhello")
        tracker.replace_body("acme/api", first.number, _body(1) + "edited\n")
        issues = gh.issues("acme/api-v2")
    assert created and posted and (state.number, state.repo) == (2, "acme/api-v2")
    assert [(i["number"], cluster_of(i["body"])) for i in issues] == [(1, 1), (2, 2)]
    assert issues[0]["body"].endswith("edited\n") and len(gh.comments("acme/api-v2", 1)) == 1
    moved = f"/repositories/{gh.repo_id('acme/api-v2')}"
    assert [(m, t) for m, t in gh.requests if t.startswith(moved) and m != "GET"] == [("POST", f"{moved}/issues")]


# Comments: GitHub's 65,536 characters.


def test_a_comment_github_would_refuse_is_one_error_line_and_never_sent() -> None:
    with running_github() as gh:
        gh.add_repo("acme/api")
        tracker = _bare_tracker(gh)
        state, _ = tracker.file_once("acme/api", 1, "Title", _body(1), [])
        with pytest.raises(GitHubError) as raised:
            tracker.comment_once("acme/api", state.number, "<!-- m -->", "<!-- m -->\n" + "x" * 65_536)
        assert gh.comments("acme/api", state.number) == [] and not _sent(gh, "POST", r".*/comments")
    assert str(raised.value) == ("acme/api#1: the comment is 65,547 characters, GitHub takes at most 65,536: "
                                 "not posted") and "\n" not in str(raised.value)


# Secondary rate limits: the tracker's pacing keeps within GitHub's, and a limit it did not
# foresee (another client on the same account) is waited for. Pacing stays on in every test:
# the fake and the tracker share a clock that moves only when the tracker sleeps.


def test_pacing_files_a_burst_within_githubs_limit_of_80_writes_a_minute() -> None:
    clock = VirtualClock()
    with running_github(clock=clock.now) as gh:
        gh.add_repo("acme/api")
        tracker = _bare_tracker(gh, clock, seconds_between_writes=0.5)  # on its own: 120 a minute
        started = clock.now()
        filed = [tracker.file_once("acme/api", n, f"Problem {n}", _body(n), [])[1] for n in range(1, 101)]
        assert all(filed) and gh.secondary_limited == [] and len(gh.issues("acme/api")) == 100
    assert clock.now() - started >= 60  # the 81st write (the label was the first) waited for the minute
    assert clock.waits and all(wait >= 0.5 - 1e-9 for wait in clock.waits)


def test_the_hours_limit_stops_the_run_with_one_line_per_issue_and_nothing_over_it() -> None:
    clock = VirtualClock()
    with running_github(clock=clock.now) as gh:
        gh.add_repo("acme/api")
        gh.write_limits = ((8, 60.0), (20, 3600.0))  # GitHub's, scaled down; the tracker told the same
        limits = {"writes_per_minute": 8, "writes_per_hour": 20}
        tracker = _bare_tracker(gh, clock, **limits)
        errors = []
        for n in range(1, 26):
            try:
                tracker.file_once("acme/api", n, f"Problem {n}", _body(n), [])
            except GitHubError as exc:
                errors.append(str(exc))
        assert gh.secondary_limited == [] and len(gh.issues("acme/api")) == 19  # the label was the first write
        assert len(errors) == 6 and all("20 writes an hour" in e and "run it again after" in e for e in errors)
        clock.sleep(3600)
        again = _bare_tracker(gh, clock, **limits)
        results = [again.file_once("acme/api", n, f"Problem {n}", _body(n), []) for n in range(1, 26)]
        assert [created for _, created in results].count(True) == 6 and len(gh.issues("acme/api")) == 25


def test_a_secondary_limit_the_pacing_did_not_foresee_is_waited_for_and_files_once() -> None:
    clock = VirtualClock()
    with running_github(clock=clock.now) as gh:
        gh.add_repo("acme/api")
        gh.write_limits = ((3, 60.0), (500, 3600.0))  # tighter than the tracker's 80 a minute
        tracker = _bare_tracker(gh, clock)
        results = [tracker.file_once("acme/api", n, f"Problem {n}", _body(n), []) for n in range(1, 11)]
        issues = gh.issues("acme/api")
    assert all(created for _, created in results) and gh.secondary_limited
    assert [cluster_of(i["body"]) for i in issues] == list(range(1, 11))
    assert any(wait > 1 for wait in clock.waits)  # GitHub's Retry-After, honoured


def test_publishing_with_pacing_on_keeps_within_the_limits(github: GitHubFake, drafted: Path) -> None:
    clock = VirtualClock()
    github.write_limits = ((4, 60.0), (500, 3600.0))
    config = _config(drafted, github)
    paced = config.model_copy(update={"github": config.github.model_copy(
        update={"seconds_between_writes": 1.0, "writes_per_minute": 4})})
    github.clock = clock.now  # the fake's windows on the tracker's clock
    with Warehouse(drafted) as wh:
        run = publish(paced, wh, IssueTracker(paced.github, paced.github.token(), sleep=clock.sleep, clock=clock.now), {})
    assert run.errors == [] and len(run.filed) == 3 and github.secondary_limited == []
    writes = sum(method != "GET" for method, _ in github.requests)  # the labels and the issues
    assert writes > 4 and clock.now() - 1000 >= 60 * ((writes - 1) // 4)  # four a minute, none over
    _filed_exactly_once(github)
