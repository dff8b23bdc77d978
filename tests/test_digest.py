"""The weekly digest on the clustered sample: its figures, its safety, its two renderings."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from feedback_insights.clusters import demand, weeks
from feedback_insights.config import embedded_default
from feedback_insights.core.vocabulary import SOURCE_TIERS
from feedback_insights.digest import SPARK_WEEKS, Week, build, many, render, webhook_text, write
from feedback_insights.drafts import draft_clusters
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, run_cli, sample_copy
from .markdown_check import rendered_actions

WEEK = Week.parse("2026-W47")  # 16–22 Nov: the sample's own timestamps, whatever today is


@pytest.fixture(scope="module")
def warehouse(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory):
    with Warehouse(drafted_copy(clustered_sample, tmp_path_factory.mktemp("digest"))) as wh:
        yield wh


@pytest.fixture
def own(warehouse: Warehouse, tmp_path: Path) -> Iterator[Warehouse]:
    """A copy of the module's warehouse, for a test that changes it: no other test sees the
    change, whether the test passes or fails."""
    warehouse.checkpoint()
    with Warehouse(sample_copy(warehouse.path, tmp_path)) as wh:
        yield wh


def _week_records(wh: Warehouse, week: Week) -> pl.DataFrame:
    """The week's live reports: a report dismissed in triage is no demand."""
    records = pl.from_arrow(wh.con.sql(
        """SELECT account, service, severity, outcome, received_at, source FROM records
           WHERE status IS DISTINCT FROM 'dismissed'""").to_arrow_table())
    utc = pl.col("received_at").dt.convert_time_zone("UTC")
    return records.filter((utc >= week.start) & (utc < week.end))


def test_weeks_parse_and_default_to_the_last_complete_one() -> None:
    assert (WEEK.start.isoformat(), WEEK.end.isoformat()) == ("2026-11-16T00:00:00+00:00", "2026-11-23T00:00:00+00:00")
    assert str(Week.before(WEEK.start + timedelta(days=8, hours=8))) == "2026-W47"  # Tuesday of W48
    for bad in ("2026-48", "2026-W54", "W48"):
        with pytest.raises(ValueError, match="--week"):
            Week.parse(bad)


def test_headline_numbers_match_the_records(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    week = _week_records(warehouse, WEEK)
    blocked = week.filter((pl.col("severity") == "blocking") | (pl.col("outcome") == "blocked")).height
    assert digest.headline["reports"] == week.height > 0
    assert digest.headline["accounts"] == week["account"].drop_nulls().n_unique()
    assert digest.headline["services"] == week["service"].drop_nulls().n_unique()
    assert digest.headline["blocked_share"] == pytest.approx(blocked / week.height)
    assert digest.last_week["reports"] == _week_records(warehouse, Week.parse("2026-W46")).height
    assert sum(s["reports"] for s in digest.services) == week.height
    assert sum(lane["reports"] for lane in digest.lanes) == week.height


def test_the_digest_splits_the_week_by_who_reported(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    week = _week_records(warehouse, WEEK)
    by_tier = {row["tier"]: row for row in digest.tiers}
    assert set(by_tier) == {"agent", "runtime", "human"}
    for tier, sources in SOURCE_TIERS.items():
        rows = week.filter(pl.col("source").is_in(sources))
        assert by_tier[tier]["reports"] == rows.height > 0
        assert by_tier[tier]["accounts"] == rows["account"].drop_nulls().n_unique()
    assert sum(row["reports"] for row in digest.tiers) == digest.headline["reports"]
    for p in digest.top_problems:
        assert p["accounts_agent"] + p["accounts_runtime"] + p["accounts_human"] >= p["accounts"]
    html, markdown = render(digest, "html"), render(digest, "md")
    assert "Who reported" in html and "## Who reported" in markdown


def test_a_digest_for_one_source_counts_only_its_reports(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK, source="human")
    week = _week_records(warehouse, WEEK).filter(pl.col("source") == "human_authored")
    assert digest.source == "human"
    assert digest.headline["reports"] == week.height > 0
    assert digest.headline["accounts"] == week["account"].drop_nulls().n_unique()
    assert [row["tier"] for row in digest.tiers] == ["human"]
    assert digest.top_problems and all(p["accounts"] == p["accounts_human"] for p in digest.top_problems)
    assert {p["service"] for p in digest.top_problems} == {"pags-console"}  # people report only there
    assert "Only reports from people" in render(digest, "html") and "Only reports from people" in render(digest, "md")


def test_a_dismissed_report_leaves_the_digest(own: Warehouse) -> None:
    before = build(own, WEEK)
    problem = before.top_problems[0]
    collector, record = own.con.execute(
        """SELECT m.collector, m.id FROM cluster_members m JOIN records r USING (collector, id)
           WHERE m.cluster_id = ? AND r.received_at >= ? AND r.received_at < ? ORDER BY r.id LIMIT 1""",
        [problem["cluster_id"], WEEK.start, WEEK.end],
    ).fetchall()[0]
    own.con.execute("UPDATE records SET status = 'dismissed' WHERE collector = ? AND id = ?", [collector, record])
    after = build(own, WEEK)
    assert after.headline["reports"] == before.headline["reports"] - 1
    assert sum(s["reports"] for s in after.services) == after.headline["reports"]
    again = next(p for p in after.cards if p["cluster_id"] == problem["cluster_id"])
    assert again["reports"] == problem["reports"] - 1 and again["dismissed_reports"] == problem["dismissed_reports"] + 1


def test_top_problems_are_ranked_by_accounts_this_week_with_an_8_week_sparkline(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    top = digest.top_problems
    assert top and all(p["polarity"] == "problem" for p in top)
    assert [p["accounts_this_week"] for p in top] == sorted((p["accounts_this_week"] for p in top), reverse=True)
    for p in top:
        assert len(p["spark"]) == SPARK_WEEKS and p["spark"][-1] == p["accounts_this_week"]
        assert max(p["spark"]) <= p["accounts"]
    assert all(p["trend"] == "new" for p in digest.new) and all(p["trend"] == "rising" for p in digest.rising)
    assert all(p["polarity"] == "praise" for p in digest.praise) and digest.praise
    assert digest.goals and digest.issues  # goal themes, and the drafts waiting for review


def test_fixed_issues_and_regressions_are_reported(own: Warehouse) -> None:
    cluster_id = build(own, WEEK).top_problems[0]["cluster_id"]
    fixed_at = WEEK.start + timedelta(days=1)
    own.con.execute(
        "UPDATE drafts SET status = 'filed', known_status = 'fixed', issue_url = 'https://github.example/acme/api/issues/7' WHERE cluster_id = ?",
        [cluster_id],
    )
    own.con.execute("UPDATE clusters SET status = 'fixed', fixed_at = ? WHERE id = ?", [fixed_at, cluster_id])
    digest = build(own, WEEK)
    assert [f["cluster_id"] for f in digest.fixed] == [cluster_id]
    # Reports after the fix: a regression, linked to its issue, shown first and only there.
    assert cluster_id in {r["cluster_id"] for r in digest.regressions}
    assert cluster_id not in {p["cluster_id"] for p in digest.top_problems + digest.new + digest.rising}
    regression = next(r for r in digest.regressions if r["cluster_id"] == cluster_id)
    assert regression["issue"]["issue_url"] == "https://github.example/acme/api/issues/7"
    assert regression["status"] == {"kind": "fixed", "text": "fixed (#7)",
                                    "url": "https://github.example/acme/api/issues/7", "desk": None}
    assert digest.fixed_unlisted == []  # its card says it is fixed: not listed again
    markdown = render(digest, "md")
    assert markdown.index("## Came back after a fix") < markdown.index("## Top problems")
    assert "[fixed (#\u200b7)](https://github.example/acme/api/issues/7)" in markdown


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))


def test_the_html_is_self_contained_and_report_text_stays_text(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    digest.top_problems[0]["quote"] = '<script>alert(1)</script><img src="https://evil.example/p.png"> @octocat'
    html = render(digest, "html")
    parser = _Tags()
    parser.feed(html)
    tags = [tag for tag, _ in parser.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert tags.count("svg") == len(digest.cards) + 2
    assert not [a for _, a in parser.tags for k, v in a.items() if k in ("src", "href") and v and v.startswith(("http", "//")) and "github" not in v]


def test_the_markdown_quotes_agents_inert(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    digest.praise[0]["quote"] = "Love it! cc @octocat, closes #1, see https://evil.example ![x](https://evil.example/x.png)"
    markdown = render(digest, "md")
    assert "@&#8203;octocat" in markdown
    issues = {url for (url,) in warehouse.con.execute("SELECT issue_url FROM drafts WHERE issue_url IS NOT NULL").fetchall()}
    assert issues  # the sample's issue filed by hand: the one link the digest may hold
    assert rendered_actions(markdown, extra_tags={"h1", "ol", "code"}, allowed_link=issues.__contains__) == []
    assert f"# What agents told us · {WEEK}" in markdown


def test_the_command_writes_both_formats_and_posts_to_a_webhook(warehouse: Warehouse, tmp_path: Path, hook) -> None:
    received, url = hook
    warehouse.checkpoint()  # the command opens its own copy: a DuckDB file has one writer
    shutil.copyfile(warehouse.path, tmp_path / "feedback.duckdb")
    (tmp_path / "feedback-insights.toml").write_text(
        '[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\nfolder = "out"\nwebhook_env = "FI_HOOK"\n'
    )
    done = run_cli("digest", "--week", str(WEEK), cwd=tmp_path, env={**os.environ, "FI_HOOK": url})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / f"digest-{WEEK}.html").is_file() and (tmp_path / "out" / f"digest-{WEEK}.md").is_file()
    with Warehouse(tmp_path / "feedback.duckdb") as wh:
        assert received == [{"text": webhook_text(build(wh, WEEK), "slack")}]  # Slack's mrkdwn by default
    bad = run_cli("digest", "--week", "2026-48", cwd=tmp_path)
    assert bad.returncode == 2 and "--week: expected an ISO week like 2026-W48" in bad.stderr


def test_the_command_writes_a_digest_for_one_source_beside_the_whole_one(warehouse: Warehouse, tmp_path: Path) -> None:
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, tmp_path / "feedback.duckdb")
    (tmp_path / "feedback-insights.toml").write_text('[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n'
                                                     '[digest]\nfolder = "out"\n')
    done = run_cli("digest", "--week", str(WEEK), "--format", "md", "--source", "agent", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == [f"digest-{WEEK}-agent.md"]
    assert "Only reports from agents" in (tmp_path / "out" / f"digest-{WEEK}-agent.md").read_text()
    bad = run_cli("digest", "--week", str(WEEK), "--source", "bots", cwd=tmp_path)
    assert bad.returncode == 2 and "--source must be one of: agent, runtime, human" in bad.stderr


def test_write_names_the_files_by_week(warehouse: Warehouse, tmp_path: Path) -> None:
    paths = write(build(warehouse, WEEK), tmp_path, ("md",))
    assert [p.name for p in paths] == [f"digest-{WEEK}.md"]


def test_a_week_is_monday_midnight_to_monday_midnight(own: Warehouse) -> None:
    """A report at the week's first instant is in it; one at the next Monday's is not."""
    before = {p["cluster_id"]: p for p in build(own, WEEK).top_problems}
    cluster_id, row = next(iter(before.items()))
    collector, record = own.con.execute(
        "SELECT collector, id FROM cluster_members WHERE cluster_id = ? LIMIT 1", [cluster_id]
    ).fetchall()[0]
    for i, moment in enumerate((WEEK.start, WEEK.end)):
        own.con.execute(
            """INSERT INTO records SELECT * REPLACE (? AS id, ? AS account, ? AS received_at) FROM records
               WHERE collector = ? AND id = ?""",
            [f"edge-{i}", f"acct_edge_{i}", moment, collector, record],
        )
        own.con.execute("INSERT INTO cluster_members VALUES ('reports', ?, ?, NULL, ?, 'nearest', now())",
                              [collector, f"edge-{i}", cluster_id])
    after = {p["cluster_id"]: p for p in build(own, WEEK).top_problems}
    assert after[cluster_id]["accounts_this_week"] == row["accounts_this_week"] + 1
    assert after[cluster_id]["spark"][-1] == row["spark"][-1] + 1


def test_a_failing_webhook_is_named_by_its_variable_never_by_its_url(warehouse: Warehouse, tmp_path: Path) -> None:
    secret_path = "/services/T0CANARY/B0CANARY/Xq7canaryWebhookSecret"
    answers: list[int] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            status = 503 if len(answers) < 1 else 404  # a retried failure, then a refusal
            answers.append(status)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, tmp_path / "feedback.duckdb")
    (tmp_path / "feedback-insights.toml").write_text(
        '[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\nfolder = "out"\nwebhook_env = "FI_HOOK"\n'
    )
    try:
        done = run_cli("digest", "--week", str(WEEK), cwd=tmp_path,
                       env={**os.environ, "FI_HOOK": f"http://127.0.0.1:{server.server_address[1]}{secret_path}"})
    finally:
        server.shutdown()
    assert answers == [503, 404]  # the 503 was retried; the 404 is an answer
    assert done.returncode == 2
    assert done.stderr.strip() == "error: the digest webhook ($FI_HOOK) answered 404: check the URL in $FI_HOOK"
    assert "CANARY" not in done.stdout + done.stderr


def _copy(warehouse: Warehouse, folder: Path) -> Path:
    """A copy of the drafted sample with a configuration beside it, for the commands."""
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, folder / "feedback.duckdb")
    (folder / "feedback-insights.toml").write_text('[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n')
    return folder / "feedback.duckdb"


def _listed(folder: Path, *options: str) -> dict[int, dict]:
    done = run_cli("clusters", "list", "--json", "-n", "0", *options, cwd=folder)
    assert done.returncode == 0, done.stderr
    return {row["cluster_id"]: row for row in map(json.loads, done.stdout.splitlines())}


def _shown_this_week(folder: Path, cluster_id: int, *options: str) -> int:
    done = run_cli("clusters", "show", str(cluster_id), *options, cwd=folder)
    assert done.returncode == 0, done.stderr
    return int(re.search(r"^  accounts_this_week: (\d+)$", done.stdout, re.MULTILINE).group(1))


def _drafted_this_week(body: str) -> int:
    """The "this week" cell of a drafted issue's demand table."""
    return int(re.search(r"^\|---:.*\n\| \d+ \| (\d+) \|", body, re.MULTILINE).group(1))


def test_this_week_is_one_figure_in_the_list_show_drafts_and_the_digest(warehouse: Warehouse, tmp_path: Path) -> None:
    """For the same as-of instant (the digest's: the end of its week), every reader counts the
    same distinct accounts this week for the same cluster."""
    path = _copy(warehouse, tmp_path)
    with Warehouse(path) as wh:
        wh.con.execute("DELETE FROM drafts WHERE drafted_by <> 'hand'")  # drafted afresh, as of the week's end
        draft_clusters(embedded_default(path), wh, as_of=WEEK.end)
        digest = build(wh, WEEK)
        bodies = dict(wh.con.execute("SELECT cluster_id, body FROM drafts WHERE drafted_by <> 'hand'").fetchall())
    in_digest = {p["cluster_id"]: p["accounts_this_week"] for p in digest.top_problems}
    listed = _listed(tmp_path, "--as-of", "2026-11-23")  # a date: its midnight, UTC
    assert {listed[c]["week"] for c in in_digest} == {str(WEEK)}
    assert {c: listed[c]["accounts_this_week"] for c in in_digest} == in_digest
    drafted = {c: _drafted_this_week(bodies[c]) for c in in_digest if c in bodies}
    assert len(drafted) >= 3 and drafted == {c: in_digest[c] for c in drafted}
    for c in list(in_digest)[:3]:
        assert _shown_this_week(tmp_path, c, "--as-of", "2026-11-23T00:00:00Z") == in_digest[c]
    markdown = render(digest, "md")
    for p in digest.top_problems:
        assert f"**{many(in_digest[p['cluster_id']], 'account')} this week**, {p['accounts_last_week']} last week" in markdown
    assert all(f"this week is {WEEK}" in bodies[c] for c in drafted)


def test_by_default_the_list_counts_the_week_of_the_newest_report_as_the_digest_does(
        warehouse: Warehouse, tmp_path: Path) -> None:
    """The sample's newest report is in its last week: the list (as of that report) and that
    week's digest give the same accounts this week, with no option given."""
    (latest,) = warehouse.con.execute("SELECT max(received_at) FROM records").fetchall()[0]
    week = Week.before(latest + timedelta(days=7))  # the week holding the newest report
    digest = build(warehouse, week)
    _copy(warehouse, tmp_path)
    listed = _listed(tmp_path)
    assert digest.top_problems
    for p in digest.top_problems:
        row = listed[p["cluster_id"]]
        assert (row["week"], row["accounts_this_week"], row["accounts_last_week"]) == (
            str(week), p["accounts_this_week"], p["accounts_last_week"])


def test_an_ignored_cluster_stays_out_of_every_ranking(own: Warehouse) -> None:
    before = build(own, WEEK)
    ignored = before.top_problems[0]["cluster_id"]
    goal = before.goals[0]["cluster_id"]
    own.con.execute("UPDATE clusters SET status = 'ignored' WHERE id IN (?, ?)", [ignored, goal])
    after = build(own, WEEK)
    ranked = after.top_problems + after.new + after.rising + after.regressions + after.praise + after.goals
    assert ignored not in {p["cluster_id"] for p in ranked} and goal not in {g["cluster_id"] for g in after.goals}
    kept = [p["cluster_id"] for p in before.top_problems if p["cluster_id"] != ignored]
    assert [p["cluster_id"] for p in after.top_problems][: len(kept)] == kept  # the next one moves up
    # Its draft is not waiting for review; the week's totals still say what arrived.
    assert ignored not in {i["cluster_id"] for i in after.issues if i["status"] != "filed"}
    assert after.headline == before.headline and after.services == before.services


def test_a_cluster_that_needs_review_is_flagged_in_both_renderings(own: Warehouse) -> None:
    before = build(own, WEEK)
    flagged = before.top_problems[0]["cluster_id"]
    own.con.execute("UPDATE clusters SET needs_review = (id = ?)", [flagged])
    digest = build(own, WEEK)
    assert [p["needs_review"] for p in digest.top_problems] == [p["cluster_id"] == flagged for p in digest.top_problems]
    markdown, html = render(digest, "md"), render(digest, "html")
    first = next(line for line in markdown.splitlines() if line.startswith("1. "))
    assert "· needs review" in first and markdown.count("needs review") == 1  # its one card
    assert html.count(">needs review</span>") == 1


# -- cards a product manager acts on -----------------------------------------------------------


def _members_in(wh: Warehouse, start, end) -> pl.DataFrame:
    """Each live report of a problem card's cluster received in ``[start, end)``."""
    return pl.from_arrow(wh.con.sql(
        """SELECT m.cluster_id, r.account, r.severity = 'blocking' OR r.outcome = 'blocked' AS blocking
           FROM cluster_members m JOIN records r USING (collector, id)
           WHERE m.view = 'reports' AND r.status IS DISTINCT FROM 'dismissed'
             AND r.received_at >= $start AND r.received_at < $end""", params={"start": start, "end": end}).to_arrow_table())


def test_a_card_counts_accounts_reports_and_blocking_in_the_same_two_weeks(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    counted = weeks(WEEK.end)  # the one definition of this week and last week
    assert (counted.this_week, counted.last_week) == (WEEK.start, WEEK.start - timedelta(days=7))
    this = _members_in(warehouse, counted.this_week, WEEK.end)
    last = _members_in(warehouse, counted.last_week, counted.this_week)
    figures = {row["cluster_id"]: row for row in demand(warehouse, as_of=WEEK.end).to_dicts()}
    assert len(digest.cards) >= 10
    for p in digest.cards:
        mine, before = this.filter(cluster_id=p["cluster_id"]), last.filter(cluster_id=p["cluster_id"])
        assert p["accounts_this_week"] == mine["account"].drop_nulls().n_unique() == figures[p["cluster_id"]]["accounts_this_week"]
        assert p["accounts_last_week"] == before["account"].drop_nulls().n_unique() == figures[p["cluster_id"]]["accounts_last_week"]
        assert (p["reports_this_week"], p["reports_last_week"]) == (mine.height, before.height)
        assert (p["blocking_this_week"], p["blocking_last_week"]) == (mine["blocking"].sum(), before["blocking"].sum())
        assert p["spark"][-2:] == [p["accounts_last_week"], p["accounts_this_week"]]
    assert any(p["blocking_this_week"] != p["blocking_reports"] for p in digest.cards)  # not all-time any more
    assert any(p["accounts_last_week"] != p["accounts_this_week"] for p in digest.cards)
    p = digest.top_problems[0]
    markdown, html = render(digest, "md"), render(digest, "html")
    line = (f"**{many(p['accounts_this_week'], 'account')} this week**, {p['accounts_last_week']} last week (+1)"
            f" · {many(p['reports_this_week'], 'report')}, {p['blocking_this_week']} blocking this week")
    assert p["accounts_this_week"] - p["accounts_last_week"] == 1 and line in markdown
    # The sparkline's figures are text beside it, not only in its tooltip.
    shown = "accounts per week, oldest first: " + " · ".join(map(str, p["spark"]))
    assert shown in markdown and shown in html


def test_each_problem_is_listed_once(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    ids = [p["cluster_id"] for p in digest.cards]
    assert len(ids) == len(set(ids)) and digest.new and digest.rising
    # What used to repeat: a new or rising problem among the top ones, a drafted one in the list.
    assert any(p["trend"] != "steady" for p in digest.top_problems)
    drafted = {i["cluster_id"] for i in digest.issues} & set(ids)
    assert drafted and not drafted & {i["cluster_id"] for i in digest.issues_unlisted}
    markdown = render(digest, "md")
    for p in digest.cards:
        assert markdown.count(f"**{render_name(p)}**") == 1, p["name"]
    assert "Who reported" in markdown and "agents, runtimes" not in markdown.split("## Who reported")[1].split("##")[0]


def render_name(p: dict) -> str:
    from feedback_insights.drafts import neutralise

    return neutralise.inline(p["name"], 140)


def test_a_card_says_where_its_problem_stands_and_links_the_issue_or_the_desk(own: Warehouse) -> None:
    desk = "https://desk.example:8790"
    digest = build(own, WEEK, desk_url=desk)
    by_kind = {p["status"]["kind"]: p for p in digest.cards}
    pending, filed = by_kind["pending"], by_kind["filed"]
    assert pending["status"] == {"kind": "pending", "text": "draft waiting for review",
                                 "url": f"{desk}/drafts/{pending['issue']['id']}", "desk": f"{desk}/clusters/{pending['cluster_id']}"}
    number = filed["issue"]["issue_number"]
    assert filed["status"]["text"] == f"filed as #{number}" and filed["status"]["url"] == filed["issue"]["issue_url"]
    undrafted = next(p for p in digest.cards if p["issue"] is None)
    assert undrafted["status"] == {"kind": "none", "text": "no draft yet", "url": f"{desk}/clusters/{undrafted['cluster_id']}",
                                   "desk": f"{desk}/clusters/{undrafted['cluster_id']}"}
    html = render(digest, "html")
    assert f'<a href="{desk}/drafts/{pending["issue"]["id"]}"' in html and f'href="{filed["issue"]["issue_url"]}"' in html
    slack = webhook_text(digest, "slack")
    assert f"<{filed['issue']['issue_url']}|filed as #{number}>" in slack
    cluster = pending["cluster_id"]
    own.con.execute("UPDATE drafts SET status = 'filed', known_status = 'planned', issue_number = 41, "
                    "issue_url = 'https://github.com/acme/api/issues/41' WHERE cluster_id = ?", [cluster])
    again = next(p for p in build(own, WEEK, desk_url=desk).cards if p["cluster_id"] == cluster)
    assert (again["status"]["kind"], again["status"]["text"]) == ("planned", "planned (#41)")
    # A link a collector gave (an issue filed by hand) that could close a Markdown or Slack link is not linked.
    own.con.execute("UPDATE drafts SET issue_url = 'https://github.com/a/b/issues/41) [x](https://evil.example' "
                    "WHERE cluster_id = ?", [cluster])
    again = next(p for p in build(own, WEEK, desk_url=desk).cards if p["cluster_id"] == cluster)
    assert again["status"]["url"] == f"{desk}/drafts/{again['issue']['id']}"


def test_a_theme_named_only_by_its_key_terms_is_named_in_words(own: Warehouse) -> None:
    goal = build(own, WEEK).goals[0]
    (terms,) = own.con.execute("SELECT key_terms FROM clusters WHERE id = ?", [goal["cluster_id"]]).fetchall()[0]
    own.con.execute("UPDATE clusters SET label = ? WHERE id = ?", [" · ".join(terms[:3]), goal["cluster_id"]])
    again = next(g for g in build(own, WEEK).goals if g["cluster_id"] == goal["cluster_id"])
    assert " · " not in again["name"] and again["name"] == " ".join(again["quote"].split())[:90]
    assert f"- {render_name(again)} ·" in render(build(own, WEEK), "md")


def test_small_numbers_read_as_words() -> None:
    assert [many(0, "account"), many(1, "account"), many(2, "service"), many(1, "person"), many(3, "person")] == [
        "0 accounts", "1 account", "2 services", "1 person", "3 people"]


def test_no_text_says_1_accounts(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK, source="human")
    texts = [render(digest, "html"), render(digest, "md"), webhook_text(digest, "slack")]
    assert any("1 account " in t for t in texts)
    for text in texts:
        assert not re.search(r"\b1 (accounts|reports|services|agents|runtimes|peoples?)\b", text)


def test_an_empty_week_says_so_in_one_sentence(warehouse: Warehouse) -> None:
    empty = Week.parse("2026-W30")  # months before the sample
    digest = build(warehouse, empty)
    assert digest.empty and digest.cards == []
    markdown, html, slack = render(digest, "md"), render(digest, "html"), webhook_text(digest, "slack")
    assert "No feedback arrived in 2026-W30 (Mon 20 Jul 2026 to Sun 26 Jul 2026)." in markdown
    assert "##" not in markdown and "0 reports" not in markdown
    assert "<p class=\"empty-week\"" in html and "<h2>" not in html
    assert "No feedback arrived in 2026-W30." in slack and "*Top problems" not in slack


def _hostile_digest(warehouse: Warehouse):
    digest = build(warehouse, WEEK)
    digest.top_problems[0]["name"] = ("<!channel> <@U024BE7LH> @here & *bold* \\_x\\_ [click](https://evil.example) "
                                      "<https://evil.example|docs> www.evil.example evil.example/login")
    return digest


def test_the_slack_text_is_mrkdwn_and_inert(warehouse: Warehouse) -> None:
    digest = _hostile_digest(warehouse)
    slack = webhook_text(digest, "slack")
    assert slack.startswith(f"*What agents told us · {WEEK}*\n")
    line = next(line for line in slack.splitlines() if "channel" in line)
    # No backslash escapes; &, < and > as Slack wants them; no ping, no link of the report's.
    trend = digest.top_problems[0]["trend"]
    assert line == ("• *&lt;!channel&gt; &lt;@\u200bU024BE7LH&gt; @\u200bhere &amp; *bold* \\_x\\_ [click](https\u200b://evil.\u200bexample) "
                    "&lt;https\u200b://evil.\u200bexample|docs&gt; www\u200b.evil.\u200bexample evil.\u200bexample/login*"
                    + ("" if trend == "steady" else f" · {trend}"))
    links = re.findall(r"<([^>]*)>", slack)
    assert links and all(re.fullmatch(r"https://github\.com/[\w/.-]+\|filed as #\d+", link) for link in links)
    assert "\\" not in slack.replace(line, "")  # nothing of ours is backslash-escaped
    assert "validate_item" in slack  # a name as written


def test_the_markdown_webhook_format_sends_the_markdown_digest(warehouse: Warehouse) -> None:
    digest = _hostile_digest(warehouse)
    markdown = webhook_text(digest, "markdown")
    assert markdown == render(digest, "md")
    issues = {url for (url,) in warehouse.con.execute("SELECT issue_url FROM drafts WHERE issue_url IS NOT NULL").fetchall()}
    assert rendered_actions(markdown, extra_tags={"h1", "ol", "code"}, allowed_link=issues.__contains__) == []
    with pytest.raises(ValueError, match="webhook_format must be one of: slack, markdown"):
        webhook_text(digest, "teams")


def _config_beside(warehouse: Warehouse, folder: Path, digest: str = "") -> None:
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, folder / "feedback.duckdb")
    (folder / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\nfolder = "out"\n{digest}')


def test_the_webhook_gets_markdown_when_configured(warehouse: Warehouse, tmp_path: Path) -> None:
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _config_beside(warehouse, tmp_path, 'webhook_env = "FI_HOOK"\nwebhook_format = "markdown"\n')
    try:
        done = run_cli("digest", "--week", str(WEEK), "--format", "md", cwd=tmp_path,
                       env={**os.environ, "FI_HOOK": f"http://127.0.0.1:{server.server_address[1]}/hook"})
        assert done.returncode == 0, done.stderr
        assert received == [{"text": (tmp_path / "out" / f"digest-{WEEK}.md").read_text()}]
        assert done.stdout.splitlines()[-1] == "sent: webhook"
        quiet = run_cli("digest", "--week", str(WEEK), "--no-send", cwd=tmp_path, env={**os.environ, "FI_HOOK": "http://x"})
        assert quiet.returncode == 0, quiet.stderr
        assert len(received) == 1 and "sent:" not in quiet.stdout
    finally:
        server.shutdown()


def test_a_week_not_begun_is_one_line_of_error(warehouse: Warehouse, tmp_path: Path) -> None:
    _config_beside(warehouse, tmp_path)
    done = run_cli("digest", "--week", "2099-W01", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: --week: 2099-W01 has not begun; this week is ") and "the last complete one" in line
    assert not (tmp_path / "out").exists()


def test_an_operator_whose_reports_are_all_from_this_week_is_told_how_to_ask_for_it(
        warehouse: Warehouse, tmp_path: Path) -> None:
    _config_beside(warehouse, tmp_path)
    this_week = Week.of(datetime.now(UTC))
    with Warehouse(tmp_path / "feedback.duckdb") as wh:  # everything arrived at this week's first instant
        wh.con.execute("UPDATE records SET received_at = ?", [this_week.start])
    done = run_cli("digest", "--format", "md", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = Week.before(datetime.now(UTC))
    reports = warehouse.con.execute("SELECT count(*) FROM records WHERE status IS DISTINCT FROM 'dismissed'").fetchall()[0][0]
    assert done.stderr.strip() == (
        f"{last} had no reports: the digest covers the last complete week, and the {reports} reports so far are "
        f"from this week, {this_week}. For this week's digest so far: feedback-insights digest --week {this_week}")
    assert f"No feedback arrived in {last}" in (tmp_path / "out" / f"digest-{last}.md").read_text()
    asked = run_cli("digest", "--format", "md", "--week", str(this_week), cwd=tmp_path)
    assert asked.returncode == 0 and asked.stderr == ""
    text = (tmp_path / "out" / f"digest-{this_week}.md").read_text()
    assert "**This week is not over:** the figures are those so far." in text and f"**{reports} reports**" in text


def test_only_plain_issue_urls_are_linked_and_the_desk_url_is_checked(tmp_path: Path) -> None:
    from feedback_insights.config import ConfigError, load
    from feedback_insights.digest import safe_url

    assert safe_url("https://github.com/acme/api/issues/12") == "https://github.com/acme/api/issues/12"
    for bad in ("https://github.com/a/b/issues/1\n", "javascript:alert(1)", "https://x.example/a|b>", "https://x.example/a)(b", None):
        assert safe_url(bad) is None
    path = tmp_path / "feedback-insights.toml"
    path.write_text('[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\ndesk_url = "https://desk.example/"\nwebhook_format = "markdown"\n')
    assert (load(path).digest.desk_url, load(path).digest.webhook_format) == ("https://desk.example", "markdown")
    for line, key in (('desk_url = "javascript:alert(1)"', "desk_url"), ('webhook_format = "teams"', "webhook_format")):
        path.write_text(f'[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[digest]\n{line}\n')
        with pytest.raises(ConfigError, match=f"digest.{key}"):
            load(path)
