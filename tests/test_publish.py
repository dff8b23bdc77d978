"""Publishing against real local servers: PyGithub → the GitHub fake, known_issue → our
collector, write-back → a copy of the sample's in-session SQLite table."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest

from feedback_insights.config import (
    Config,
    GitHubConfig,
    HttpCollectorConfig,
    SqlTableConfig,
    embedded_default,
)
from feedback_insights.drafts import approve, cluster_of, draft_clusters, edit_form, get_draft, save_edit
from feedback_insights.ingest import CollectorClient
from feedback_insights.publish import IssueState, IssueTracker, publish
from feedback_insights.warehouse import Warehouse

from .collector_server import PIPELINE_KEY, RunningCollector, running_collector
from .conftest import SAMPLE, drafted_copy, sample_copy
from .github_fake import GitHubFake, running_github
from .markdown_check import TEMPLATE, active_elements

REPOS = {"acme-companies-api": "acme/companies-api", "orbit-mcp": "orbit/mcp"}
ISSUES = r"/repos/[^/]+/[^/]+/issues"


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch):
    with running_github() as gh:
        for repo in (*REPOS.values(), "pags/console"):
            gh.add_repo(repo)
        monkeypatch.setenv("FI_TEST_GITHUB_TOKEN", gh.token)
        yield gh


def _config(path: Path, gh: GitHubFake, **changes: object) -> Config:
    github = GitHubConfig(
        base_url=gh.url, token_env="FI_TEST_GITHUB_TOKEN", repos=REPOS, default_repo="pags/console",
        timeout=1, retries=3, backoff=0.05, seconds_between_writes=0,
    )
    return embedded_default(path).model_copy(update={"github": github, **changes})


class Clock:
    """Records the waits the tracker asks for instead of sleeping through them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _tracker(config: Config, clock: Clock | None = None) -> IssueTracker:
    return IssueTracker(config.github, config.github.token(), sleep=clock or Clock())


@pytest.fixture
def drafted(clustered_sample: Path, tmp_path: Path) -> Path:
    """A copy of the clustered sample with every draft made and the first three approved."""
    path = drafted_copy(clustered_sample, tmp_path)
    with Warehouse(path) as wh:
        for (draft_id,) in wh.con.execute("SELECT id FROM drafts WHERE status = 'pending' ORDER BY id LIMIT 3").fetchall():
            approve(wh, draft_id, "maria")
    return path


def _all_issues(gh: GitHubFake) -> list[dict]:
    return [issue for repo in (*REPOS.values(), "pags/console") for issue in gh.issues(repo)]


def test_approved_drafts_are_filed_once_with_their_labels(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        approved = wh.con.sql("SELECT * FROM drafts WHERE status = 'approved' ORDER BY id").pl().to_dicts()
        run = publish(config, wh, _tracker(config), {})
        assert run.errors == [] and len(run.filed) == 3
        for draft in approved:
            filed = get_draft(wh, draft["id"])
            assert filed["status"] == "filed" and filed["known_status"] == "acknowledged"
            repo = filed["repo"]
            [issue] = [i for i in github.issues(repo) if i["number"] == filed["issue_number"]]
            assert issue["html_url"] == filed["issue_url"] and issue["title"] == draft["title"]
            assert issue["body"] == draft["body"] and cluster_of(issue["body"]) == draft["cluster_id"]
            assert {label["name"] for label in issue["labels"]} == {"agent-feedback", "feedback-insights"}
            assert {"agent-feedback", "feedback-insights"} <= set(github.labels(repo))
        again = publish(config, wh, _tracker(config), {})
    assert again.filed == again.adopted == [] and again.errors == []
    assert len(_all_issues(github)) == 3


@pytest.mark.parametrize(
    ("kind", "times"),
    [("timeout_after_effect", 1), ("timeout_before_effect", 1), ("server_error", 2),
     ("server_error_after_effect", 1), ("secondary_rate_limit", 2), ("rate_limit_429", 1)],
)
def test_a_flaky_github_never_gets_a_second_issue(github: GitHubFake, drafted: Path, kind: str, times: int) -> None:
    config = _config(drafted, github)
    github.fail("POST", ISSUES, kind, times=times, retry_after=7, delay=1.5)
    clock = Clock()
    with Warehouse(drafted) as wh:
        run = publish(config, wh, _tracker(config, clock), {})
        statuses = wh.con.execute("SELECT DISTINCT status FROM drafts WHERE issue_number IS NOT NULL").fetchall()
    assert run.errors == [] and len(run.filed) + len(run.adopted) == 3
    issues = _all_issues(github)
    assert len(issues) == 3 and len({cluster_of(i["body"]) for i in issues}) == 3
    assert statuses == [("filed",)]
    if kind in ("secondary_rate_limit", "rate_limit_429"):
        assert clock.waits[:times] == [7.0] * times  # Retry-After honoured
    if kind.endswith("after_effect"):
        assert len(run.adopted) == 1  # the lost answer's issue was found by its marker


def test_a_lost_warehouse_finds_the_filed_issues_by_their_marker(github: GitHubFake, drafted: Path, tmp_path: Path) -> None:
    backup = tmp_path / "before-publish.duckdb"
    shutil.copyfile(drafted, backup)
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        first = publish(config, wh, _tracker(config), {})
    with Warehouse(backup) as wh:  # restored from before the publish: the drafts are approved again
        second = publish(_config(backup, github), wh, _tracker(config), {})
    assert sorted(url for _, url in second.adopted) == sorted(url for _, url in first.filed)
    assert second.filed == [] and len(_all_issues(github)) == 3


def test_giving_up_or_a_refusal_is_an_error_line_and_the_draft_stays_approved(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.fail("POST", ISSUES, "server_error", times=4)
    with Warehouse(drafted) as wh:
        run = publish(config, wh, _tracker(config), {})
        assert len(run.errors) == 1 and "after 4 tries (last: 502)" in run.errors[0]
        assert wh.con.execute("SELECT count(*) FROM drafts WHERE status = 'approved'").fetchall() == [(1,)]
        unmapped = config.model_copy(update={"github": config.github.model_copy(update={"repos": {}, "default_repo": None})})
        run = publish(unmapped, wh, _tracker(config), {})
    assert any("no repository for service" in e and "github.repos" in e for e in run.errors)
    assert len(_all_issues(github)) == 2


def test_a_dry_run_prints_and_changes_nothing(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        run = publish(config, wh, None, {}, dry_run=True)
        assert wh.con.execute("SELECT count(*) FROM drafts WHERE status = 'approved'").fetchall() == [(3,)]
    assert len(run.would_file) == 3 and github.requests == []
    assert all(item["repo"] in (*REPOS.values(), "pags/console") and "feedback-insights" in item["labels"] for item in run.would_file)


def test_issue_state_flows_back_to_the_draft_and_the_cluster(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        publish(config, wh, _tracker(config), {})
        one, two, three = wh.con.sql("SELECT * FROM drafts WHERE status = 'filed' AND drafted_by <> 'hand' ORDER BY id").pl().to_dicts()
        github.close_issue(one["repo"], one["issue_number"], "completed")
        github.close_issue(two["repo"], two["issue_number"], "not_planned")
        github.add_label(three["repo"], three["issue_number"], "planned")
        run = publish(config, wh, _tracker(config), {})
        assert sorted(run.status_changes) == [
            (one["id"], "acknowledged", "fixed"), (two["id"], "acknowledged", "wont_fix"), (three["id"], "acknowledged", "planned")
        ]
        clusters = dict(wh.con.execute("SELECT id, status FROM clusters").fetchall())
        assert (clusters[one["cluster_id"]], clusters[two["cluster_id"]], clusters[three["cluster_id"]]) == ("fixed", "wont_fix", "open")
        fixed_at = wh.con.execute("SELECT fixed_at FROM clusters WHERE id = ?", [one["cluster_id"]]).fetchall()[0][0]
        assert fixed_at is not None
        github.add_label(three["repo"], three["issue_number"], "in progress")
        github.reopen_issue(one["repo"], one["issue_number"])
        run = publish(config, wh, _tracker(config), {})
        assert sorted(run.status_changes) == [(one["id"], "fixed", "acknowledged"), (three["id"], "planned", "in_progress")]
        assert wh.con.execute("SELECT status, fixed_at FROM clusters WHERE id = ?", [one["cluster_id"]]).fetchall() == [("open", None)]
        assert publish(config, wh, _tracker(config), {}).status_changes == []


def _with_collector(path: Path, gh: GitHubFake, collector: RunningCollector, session_db: Path, monkeypatch) -> Config:
    """The sample's records as if the file source "sample" were an HTTP collector, and its
    in-session table writable."""
    monkeypatch.setenv("FI_TEST_PIPELINE_KEY", PIPELINE_KEY)
    sources = [
        HttpCollectorConfig(kind="http", name="sample", url=collector.url, key_env="FI_TEST_PIPELINE_KEY", retries=0),
        SqlTableConfig(kind="sql", name="sample-session", path=session_db, service="pags-console", write_back=True),
    ]
    return _config(path, gh, sources=sources)


def _known(collector: RunningCollector) -> dict[str, dict]:
    listed = httpx.get(collector.url + "/v1/known-issues", headers={"authorization": f"Bearer {PIPELINE_KEY}"}).json()
    return {k["id"]: k for k in listed["known_issues"]}


def test_known_issues_reach_the_collectors_and_follow_status_changes(
    github: GitHubFake, drafted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_db = shutil.copyfile(SAMPLE / "session.sqlite", tmp_path / "session.sqlite")
    with running_collector(tmp_path) as collector, Warehouse(drafted) as wh:
        config = _with_collector(drafted, github, collector, session_db, monkeypatch)
        first = wh.con.sql("SELECT * FROM drafts WHERE status = 'approved' ORDER BY id LIMIT 1").pl().to_dicts()[0]
        save_edit(wh, first["id"], "maria", edit_form(first).replace("workaround: \n", "workaround: Page with ?cursor= instead\n"))
        clients = {"sample": CollectorClient(collector.url, PIPELINE_KEY, retries=0)}
        run = publish(config, wh, _tracker(config), clients)
        # Every issue the pipeline knows that holds reports of this collector: the three filed now
        # and those filed by hand (one or more; a cluster of in-session rows alone is not its).
        (issues,) = wh.con.execute(_FILED_FROM_SAMPLE).fetchone()
        assert run.errors == [] and issues >= 4 and run.deliveries.sent == issues
        known = _known(collector)
        by_hand = wh.con.execute("""SELECT cluster_id, issue_url FROM drafts d WHERE drafted_by = 'hand' AND EXISTS (
            SELECT 1 FROM cluster_members m WHERE m.cluster_id = d.cluster_id AND m.collector = 'sample')""").fetchall()
        assert by_hand and all(known[f"fi-cluster-{cluster}"]["url"] == url for cluster, url in by_hand)
        filed = get_draft(wh, first["id"])
        entry = known[f"fi-cluster-{first['cluster_id']}"]
        members = [r for (r,) in wh.con.execute(
            "SELECT id FROM cluster_members WHERE cluster_id = ? AND collector = 'sample' ORDER BY id", [first["cluster_id"]]
        ).fetchall()]
        assert entry["title"] == filed["title"] and entry["url"] == filed["issue_url"] and entry["status"] == "acknowledged"
        assert entry["workaround"] == "Page with ?cursor= instead"
        assert entry["match"]["record_ids"] == members
        terms = wh.con.execute("SELECT key_terms[:3] FROM clusters WHERE id = ?", [first["cluster_id"]]).fetchall()[0][0]
        assert all(f["terms"] == terms and f["service"] == filed_service(wh, first) for f in entry["match"]["fingerprints"])
        assert publish(config, wh, _tracker(config), clients).deliveries.sent == 0  # nothing changed
        github.close_issue(filed["repo"], filed["issue_number"], "completed")
        run = publish(config, wh, _tracker(config), clients)
        assert run.deliveries.sent == 1 and _known(collector)[entry["id"]]["status"] == "fixed"


#: Filed drafts whose cluster holds a report of the collector "sample": those it is told about.
_FILED_FROM_SAMPLE = """SELECT count(*) FROM drafts d WHERE d.status = 'filed' AND EXISTS (
    SELECT 1 FROM cluster_members m WHERE m.cluster_id = d.cluster_id AND m.collector = 'sample')"""


def filed_service(wh: Warehouse, draft: dict) -> str:
    return wh.con.execute("SELECT service FROM clusters WHERE id = ?", [draft["cluster_id"]]).fetchall()[0][0]


def test_an_unreachable_collector_is_retried_on_the_next_run(
    github: GitHubFake, drafted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_db = shutil.copyfile(SAMPLE / "session.sqlite", tmp_path / "session.sqlite")
    with running_collector(tmp_path) as collector:
        config = _with_collector(drafted, github, collector, session_db, monkeypatch)
        url = collector.url
    dead = {"sample": CollectorClient(url, PIPELINE_KEY, retries=0, timeout=1)}
    with Warehouse(drafted) as wh:
        run = publish(config, wh, _tracker(config), dead)
        (issues,) = wh.con.execute(_FILED_FROM_SAMPLE).fetchone()
        assert issues >= 4  # the three filed and those filed by hand
        assert run.deliveries.sent == 0 and len(run.errors) == issues and "unreachable" in run.errors[0]
        errors = wh.con.execute("SELECT count(*) FROM known_issue_deliveries WHERE error IS NOT NULL").fetchall()
        assert errors == [(issues,)]
    with running_collector(tmp_path / "again") as collector, Warehouse(drafted) as wh:
        config = _with_collector(drafted, github, collector, session_db, monkeypatch)
        run = publish(config, wh, _tracker(config), {"sample": CollectorClient(collector.url, PIPELINE_KEY)})
        assert run.deliveries.sent == issues and run.errors == [] and len(_known(collector)) == issues


def test_filed_in_session_rows_are_written_back_once(
    github: GitHubFake, clustered_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sample_copy(clustered_sample, tmp_path)
    session_db = shutil.copyfile(SAMPLE / "session.sqlite", tmp_path / "session.sqlite")
    before = dict(sqlite3.connect(session_db).execute("SELECT id, status FROM agent_feedback").fetchall())
    with running_collector(tmp_path) as collector, Warehouse(path) as wh:
        config = _with_collector(path, github, collector, session_db, monkeypatch)
        draft_clusters(config, wh)
        rows = wh.con.execute(
            """SELECT d.id FROM drafts d JOIN cluster_members m ON m.cluster_id = d.cluster_id
               WHERE m.collector = 'sample-session' AND d.status = 'pending' GROUP BY d.id"""
        ).fetchall()
        for (draft_id,) in rows:
            approve(wh, draft_id, "maria")
        run = publish(config, wh, _tracker(config), {"sample": CollectorClient(collector.url, PIPELINE_KEY)})
        assert run.errors == []
        urls = dict(wh.con.execute(
            """SELECT m.id, d.issue_url FROM drafts d JOIN cluster_members m ON m.cluster_id = d.cluster_id
               WHERE m.collector = 'sample-session' AND d.status = 'filed'"""
        ).fetchall())
        assert publish(config, wh, _tracker(config), {"sample": CollectorClient(collector.url, PIPELINE_KEY)}).written_back == 0
    after = {row_id: (status, url) for row_id, status, url in sqlite3.connect(session_db).execute(
        "SELECT id, status, issue_url FROM agent_feedback").fetchall()}
    changed = {row_id for row_id in urls if before[row_id] in ("open", "triaged")}
    assert changed and run.written_back == len(changed)
    for row_id, (status, url) in after.items():
        if row_id in changed:
            assert (status, url) == ("filed", urls[row_id])
        else:
            assert status == before[row_id]  # dismissed, already filed, or not in a filed cluster


def test_published_bodies_have_nothing_active(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        wh.con.execute("UPDATE drafts SET status = 'approved' WHERE status = 'pending'")
        publish(config, wh, _tracker(config), {})
    issues = _all_issues(github)
    assert len(issues) >= 10
    for issue in issues:
        assert active_elements(issue["body"], **TEMPLATE) == []


def test_the_marker_survives_a_body_saved_with_crlf(github: GitHubFake, drafted: Path, tmp_path: Path) -> None:
    backup = shutil.copyfile(drafted, tmp_path / "before-publish.duckdb")
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        publish(config, wh, _tracker(config), {})
    for repo in (*REPOS.values(), "pags/console"):  # a maintainer edits each issue on github.com
        for issue in _tracker(config).repo(repo).get_issues(state="all"):
            issue.edit(body=issue.body.replace("\n", "\r\n"))
    with Warehouse(backup) as wh:
        again = publish(_config(backup, github), wh, _tracker(config), {})
    assert again.filed == [] and len(again.adopted) == 3 and len(_all_issues(github)) == 3


def test_closing_reasons_and_status_labels_map_to_known_issue_statuses() -> None:
    labels = GitHubConfig().status_labels

    def status(state: str, reason: str | None = None, *names: str) -> str:
        return IssueState(1, "u", state, reason, list(names), None).known_status(labels)

    assert status("closed", "completed") == status("closed", None) == "fixed"
    assert status("closed", "not_planned") == "wont_fix"
    assert status("closed", "duplicate") == "acknowledged"  # tracked by another issue
    assert status("open", None, "In Progress", "planned") == "in_progress"  # GitHub labels ignore case
    assert status("open", None, "PLANNED") == "planned" and status("open") == "acknowledged"


def test_failures_around_filing_are_one_line_each_and_the_run_goes_on(github: GitHubFake, drafted: Path) -> None:
    config = _config(drafted, github)
    github.fail("GET", r"/repos/acme/companies-api/labels", "server_error", times=20)
    github.fail("POST", ISSUES, "rate_limit_429", retry_after=-1)  # a nonsensical Retry-After is not a crash
    with Warehouse(drafted) as wh:
        run = publish(config, wh, _tracker(config), {})
    assert run.errors and all("labels of acme/companies-api: GitHub answered 502" in e for e in run.errors)
    assert len(run.filed) == 3 - len(run.errors) and len(_all_issues(github)) == len(run.filed)


def test_an_approved_draft_whose_cluster_was_merged_is_not_filed(github: GitHubFake, drafted: Path) -> None:
    from feedback_insights.clusters import merge

    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        first, second = wh.con.execute("SELECT cluster_id FROM drafts WHERE status = 'approved' ORDER BY id LIMIT 2").fetchall()
        service = wh.con.execute("SELECT service FROM clusters WHERE id = ?", [second[0]]).fetchall()[0][0]
        wh.con.execute("UPDATE clusters SET service = ? WHERE id = ?", [service, first[0]])  # mergeable
        merge(wh, second[0], first[0], "maria", "same problem")
        run = publish(config, wh, _tracker(config), {})
    assert len(run.skipped) == 1 and f"was merged into {second[0]}" in run.skipped[0]
    assert len(run.filed) == 2


def test_a_filed_cluster_that_grows_gets_one_demand_update_comment(github: GitHubFake, drafted: Path) -> None:
    from .test_drafts import _grow

    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        publish(config, wh, _tracker(config), {})
        draft = wh.con.sql("SELECT * FROM drafts WHERE status = 'filed' AND drafted_by <> 'hand' ORDER BY id LIMIT 1").pl().to_dicts()[0]
        _grow(wh, draft["cluster_id"], draft["accounts"])  # twice the accounts
        github.fail("POST", r"/repos/[^/]+/[^/]+/issues/\d+/comments", "timeout_after_effect", delay=1.5)
        lost = publish(config, wh, _tracker(config), {})
        assert lost.updates == [] and len(lost.errors) == 1 and "may not have been posted" in lost.errors[0]
        again = publish(config, wh, _tracker(config), {})  # finds the comment the lost answer made
        assert again.updates == [(draft["id"], draft["accounts"] * 2)] and again.errors == []
        assert publish(config, wh, _tracker(config), {}).updates == []
        assert get_draft(wh, draft["id"])["accounts"] == draft["accounts"] * 2
    [comment] = github.comments(draft["repo"], draft["issue_number"])
    assert f"agents from **{draft['accounts'] * 2} accounts** have now reported this ({draft['accounts']} when it was drafted)" in comment["body"]
    assert comment["body"].startswith(f"<!-- feedback-insights:update={draft['cluster_id']}:{draft['accounts'] * 2} -->")
    assert active_elements(comment["body"]) == []


def _filed_pair(wh: Warehouse) -> tuple[dict, dict]:
    """Two issues we filed for clusters of one service."""
    filed = wh.con.sql(
        """SELECT d.*, c.service FROM drafts d JOIN clusters c ON c.id = d.cluster_id
           WHERE d.status = 'filed' AND d.drafted_by <> 'hand' ORDER BY d.id""").pl().to_dicts()
    by_service: dict[str, list[dict]] = {}
    for draft in filed:
        by_service.setdefault(draft["service"], []).append(draft)
    [pair] = [drafts[:2] for drafts in by_service.values() if len(drafts) >= 2][:1]
    return pair[0], pair[1]


def test_a_merged_away_issue_is_withdrawn_from_the_collectors(
    github: GitHubFake, drafted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedback_insights.drafts import merge_clusters

    session_db = shutil.copyfile(SAMPLE / "session.sqlite", tmp_path / "session.sqlite")
    with running_collector(tmp_path) as collector, Warehouse(drafted) as wh:
        config = _with_collector(drafted, github, collector, session_db, monkeypatch)
        clients = {"sample": CollectorClient(collector.url, PIPELINE_KEY, retries=0)}
        assert publish(config, wh, _tracker(config), clients).errors == []
        survivor, other = _filed_pair(wh)
        gone, kept = f"fi-cluster-{other['cluster_id']}", f"fi-cluster-{survivor['cluster_id']}"
        assert {gone, kept} <= set(_known(collector))
        merge_clusters(config, wh, survivor["cluster_id"], other["cluster_id"], "dana", "one problem")
        run = publish(config, wh, _tracker(config), clients)
        assert run.errors == [] and run.deliveries.withdrawn == 1 and "1 withdrawn" in run.line()
        known = _known(collector)
        members = [r for (r,) in wh.con.execute(
            "SELECT id FROM cluster_members WHERE cluster_id = ? AND collector = 'sample' ORDER BY id",
            [survivor["cluster_id"]]).fetchall()]
        assert gone not in known and known[kept]["match"]["record_ids"] == members
        again = publish(config, wh, _tracker(config), clients)
        assert again.deliveries.withdrawn == 0 and again.deliveries.sent == 0  # withdrawn once


def test_merging_two_filed_issues_closes_the_other_as_a_duplicate_once(github: GitHubFake, drafted: Path) -> None:
    from feedback_insights.drafts import history, merge_clusters

    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        assert len(publish(config, wh, _tracker(config), {}).filed) == 3
        survivor, other = _filed_pair(wh)
        done = merge_clusters(config, wh, survivor["cluster_id"], other["cluster_id"], "dana", "one problem")
        assert done.lines()[0] == (f"issue {survivor['issue_url']} survives; {other['issue_url']} will be closed "
                                   "as its duplicate by the next publish")
        assert get_draft(wh, other["id"])["superseded_by"] == survivor["id"]
        # The comment is posted but GitHub's answer is lost: not marked yet, retried next run.
        github.fail("POST", rf"{ISSUES}/{other['issue_number']}/comments", "server_error_after_effect")
        first = publish(config, wh, _tracker(config), {})
        assert first.duplicates == [] and len(first.errors) == 1
        assert first.errors[0].startswith(f"draft {other['id']}: not yet closed as a duplicate of {survivor['issue_url']}")
        assert get_draft(wh, other["id"])["duplicate_marked_at"] is None
        second = publish(config, wh, _tracker(config), {})
        assert second.errors == [] and second.duplicates == [(other["id"], other["issue_url"], survivor["issue_url"])]
        third = publish(config, wh, _tracker(config), {})
        assert third.duplicates == [] and third.filed == []
        assert get_draft(wh, other["id"])["known_status"] == "acknowledged"
        assert "marked duplicate" in [a["action"] for a in history(wh, other["id"])]
    repo = other["repo"]
    issues = {i["number"]: i for i in github.issues(repo)}
    assert (issues[other["issue_number"]]["state"], issues[other["issue_number"]]["state_reason"]) == ("closed", "duplicate")
    assert issues[survivor["issue_number"]]["state"] == "open"
    comments = github.comments(repo, other["issue_number"])
    assert len(comments) == 1  # found by its marker, not posted twice
    assert comments[0]["body"].splitlines()[0] == f"Duplicate of #{survivor['issue_number']}"
    assert len(_all_issues(github)) == 3  # nothing new was filed for the merged cluster


def test_a_filed_issue_is_never_left_without_its_reports(github: GitHubFake, drafted: Path) -> None:
    from feedback_insights.clusters import CorrectionError
    from feedback_insights.drafts import merge_clusters

    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        publish(config, wh, _tracker(config), {})
        filed, _ = _filed_pair(wh)
        [(pending,)] = wh.con.execute(
            """SELECT d.cluster_id FROM drafts d JOIN clusters c ON c.id = d.cluster_id
               WHERE d.status = 'pending' AND c.service = ? ORDER BY d.id LIMIT 1""", [filed["service"]]).fetchall()
        members = wh.con.execute("SELECT * FROM cluster_members ORDER BY ALL").fetchall()
        with pytest.raises(CorrectionError, match=rf"merge the other way round \(clusters merge {filed['cluster_id']} {pending}\)"):
            merge_clusters(config, wh, pending, filed["cluster_id"], "dana")
        assert wh.con.execute("SELECT * FROM cluster_members ORDER BY ALL").fetchall() == members
        assert wh.con.execute("SELECT status FROM clusters WHERE id = ?", [filed["cluster_id"]]).fetchall() == [("open",)]
        done = merge_clusters(config, wh, filed["cluster_id"], pending, "dana")  # the other way round
        assert done.superseded and done.rerendered == []  # a filed issue's text is GitHub's now
        assert publish(config, wh, _tracker(config), {}).filed == []


def test_the_duplicate_comment_names_the_survivor_as_github_reads_it() -> None:
    from feedback_insights.publish import duplicate_comment

    assert duplicate_comment("acme/companies-api", 4, "Acme/Companies-API").splitlines()[0] == "Duplicate of #4"
    assert duplicate_comment("orbit/mcp", 4, "acme/companies-api").splitlines()[0] == "Duplicate of orbit/mcp#4"


def test_a_chain_of_merges_closes_each_duplicate_against_the_last_survivor(github: GitHubFake, drafted: Path) -> None:
    from feedback_insights.drafts import merge_clusters

    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        [(service,)] = wh.con.execute(
            """SELECT c.service FROM drafts d JOIN clusters c ON c.id = d.cluster_id WHERE d.status IN ('pending', 'approved')
               GROUP BY c.service HAVING count(*) >= 3 ORDER BY c.service LIMIT 1""").fetchall()
        for (draft_id,) in wh.con.execute(
                "SELECT d.id FROM drafts d JOIN clusters c ON c.id = d.cluster_id WHERE d.status = 'pending' AND c.service = ?",
                [service]).fetchall():
            approve(wh, draft_id, "maria")
        publish(config, wh, _tracker(config), {})
        first, second, last = wh.con.sql(
            """SELECT d.* FROM drafts d JOIN clusters c ON c.id = d.cluster_id
               WHERE d.status = 'filed' AND d.drafted_by <> 'hand' AND c.service = $service ORDER BY d.id LIMIT 3""",
            params={"service": service}).pl().to_dicts()
        merge_clusters(config, wh, second["cluster_id"], first["cluster_id"], "dana")
        merge_clusters(config, wh, last["cluster_id"], second["cluster_id"], "dana")
        # GitHub refuses to close the first (a token without "Issues: write"): one line, kept for later.
        github.fail("PATCH", rf"{ISSUES}/{first['issue_number']}", "integration_forbidden")
        run = publish(config, wh, _tracker(config), {})
        assert [d for d, *_ in run.duplicates] == [second["id"]] and len(run.errors) == 1
        assert run.errors[0].startswith(f"draft {first['id']}: not yet closed as a duplicate of {last['issue_url']}")
        assert '"Issues: write"' in run.errors[0]
        again = publish(config, wh, _tracker(config), {})
        assert again.errors == [] and again.duplicates == [(first["id"], first["issue_url"], last["issue_url"])]
    issues = {i["number"]: i for i in github.issues(first["repo"])}
    for draft in (first, second):
        assert (issues[draft["issue_number"]]["state"], issues[draft["issue_number"]]["state_reason"]) == ("closed", "duplicate")
        [comment] = github.comments(first["repo"], draft["issue_number"])
        assert comment["body"].startswith(f"Duplicate of #{last['issue_number']}\n")
    assert issues[last["issue_number"]]["state"] == "open"


# Exactly once without labels: GitHub drops them silently for a token without triage access,
# and a maintainer may remove them; filing finds its issues by their author and marker.

READER_TOKEN = "gh-reader-token"


def _as_reader(config: Config, gh: GitHubFake, monkeypatch: pytest.MonkeyPatch, **changes: object) -> Config:
    """The configuration with a token whose user may only read the repositories (and open issues)."""
    gh.add_token(READER_TOKEN, "outside-bot", role="read")
    monkeypatch.setenv("FI_TEST_READER_TOKEN", READER_TOKEN)
    return config.model_copy(update={"github": config.github.model_copy(update={"token_env": "FI_TEST_READER_TOKEN", **changes})})


@pytest.mark.parametrize("labels_exist", [True, False], ids=["labels-dropped", "labels-missing"])
def test_a_token_without_push_access_files_each_cluster_once(
    github: GitHubFake, drafted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labels_exist: bool
) -> None:
    backup = shutil.copyfile(drafted, tmp_path / "before-publish.duckdb")
    if labels_exist:  # a maintainer made them: the reader's issues name them, GitHub drops them
        for repo in (*REPOS.values(), "pags/console"):
            for name in ("agent-feedback", "feedback-insights"):
                _tracker(_config(drafted, github)).repo(repo).create_label(name, "ededed")
    config = _as_reader(_config(drafted, github), github, monkeypatch, retries=0)
    github.fail("POST", ISSUES, "server_error_after_effect")  # created, but the answer is a 502
    with Warehouse(drafted) as wh:
        first = publish(config, wh, _tracker(config), {})
        assert len(first.filed) == 2 and len(first.errors) == 1 and "502" in first.errors[0]
        second = publish(config, wh, _tracker(config), {})  # the failed one's issue is found
    assert second.errors == [] and second.filed == [] and len(second.adopted) == 1
    assert first.skipped and all("no triage access" in line and "without labels" in line for line in first.skipped)
    with Warehouse(backup) as wh:  # killed before anything was recorded: the warehouse from before
        third = publish(_as_reader(_config(backup, github), github, monkeypatch), wh, _tracker(config), {})
    assert third.errors == [] and third.filed == [] and len(third.adopted) == 3
    issues = _all_issues(github)
    assert len(issues) == 3 and len({cluster_of(i["body"]) for i in issues}) == 3
    assert all(i["labels"] == [] and i["user"]["login"] == "outside-bot" for i in issues)


def test_an_issue_whose_marker_label_was_removed_is_still_found(github: GitHubFake, drafted: Path, tmp_path: Path) -> None:
    backup = shutil.copyfile(drafted, tmp_path / "before-publish.duckdb")
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        assert len(publish(config, wh, _tracker(config), {}).filed) == 3
    for repo in (*REPOS.values(), "pags/console"):  # a maintainer tidies the labels away
        for issue in _tracker(config).repo(repo).get_issues(state="all"):
            issue.edit(labels=[])
    with Warehouse(backup) as wh:
        again = publish(_config(backup, github), wh, _tracker(config), {})
    assert again.filed == [] and len(again.adopted) == 3 and len(_all_issues(github)) == 3


def test_an_issue_a_stranger_filed_with_the_marker_is_not_adopted(
    github: GitHubFake, drafted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(drafted, github)
    stranger = _as_reader(config, github, monkeypatch)
    with Warehouse(drafted) as wh:
        draft_id, body, service = wh.con.execute(
            "SELECT d.id, d.body, c.service FROM drafts d JOIN clusters c ON c.id = d.cluster_id "
            "WHERE d.status = 'approved' ORDER BY d.id LIMIT 1").fetchall()[0]
        repo = config.github.repo_for(service)
        assert repo is not None
        _tracker(stranger).repo(repo).create_issue("Looks like theirs", body=body)  # marker and all
        run = publish(config, wh, _tracker(config), {})
        filed = get_draft(wh, draft_id)
    assert run.adopted == [] and len(run.filed) == 3
    [ours] = [i for i in github.issues(repo) if i["number"] == filed["issue_number"]]
    assert ours["user"]["login"] == "feedback-bot"


# Erasure reaches the demand-update comments.


@pytest.mark.parametrize("edited", [False, True], ids=["as-posted", "edited-since"])
def test_forgetting_the_report_a_demand_update_quotes_rewrites_the_comment(
    github: GitHubFake, drafted: Path, edited: bool
) -> None:
    from feedback_insights.publish import forget, records_to_forget
    from feedback_insights.publish._erasure import ERASED_QUOTE

    from .test_drafts import _grow

    canary = "TheNewestReportSaysCanaryZebra"
    config = _config(drafted, github)
    with Warehouse(drafted) as wh:
        publish(config, wh, _tracker(config), {})
        draft = wh.con.sql("SELECT * FROM drafts WHERE status = 'filed' AND drafted_by <> 'hand' ORDER BY id LIMIT 1").pl().to_dicts()[0]
        _grow(wh, draft["cluster_id"], draft["accounts"])
        newest = f"grown-{draft['cluster_id']}-0"  # made the newest report, the one the update quotes
        wh.con.execute("UPDATE records SET summary = ?, received_at = (SELECT max(received_at) FROM records) "
                       "+ INTERVAL 1 MINUTE WHERE id = ?", [canary, newest])
        assert publish(config, wh, _tracker(config), {}).updates == [(draft["id"], draft["accounts"] * 2)]
        [posted] = github.comments(draft["repo"], draft["issue_number"])
        assert canary in posted["body"] and newest in posted["body"]  # the positive control
        if edited:
            github.edit_comment(draft["repo"], posted["id"], posted["body"] + "\n\nSeen it, thanks.")
        run = forget(config, wh, records_to_forget(config, wh, record=newest), "dana", "the owner asked", _tracker(config))
        assert publish(config, wh, _tracker(config), {}).to_check == []  # reported once
    [comment] = github.comments(draft["repo"], draft["issue_number"])
    if edited:
        assert comment["body"] == posted["body"] + "\n\nSeen it, thanks."  # a person's edit is not ours to rewrite
        assert run.bodies.to_check == [f"{posted['html_url']} was edited on GitHub since it was posted and quotes an "
                                       "erased report: check it by hand"]
        return
    assert canary not in comment["body"] and newest not in comment["body"] and "grown" not in comment["body"]
    assert comment["body"] == posted["body"].split("\n\n")[0] + "\n\n" + ERASED_QUOTE + "\n"
    assert posted["html_url"] in run.bodies.rewritten and run.bodies.to_check == []
