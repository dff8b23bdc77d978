"""The weekly digest on the clustered sample: its figures, its safety, its two renderings."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from datetime import timedelta
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from feedback_insights.config import embedded_default
from feedback_insights.core.vocabulary import SOURCE_TIERS
from feedback_insights.digest import SPARK_WEEKS, Week, build, chat_text, render, write
from feedback_insights.drafts import draft_clusters
from feedback_insights.warehouse import Warehouse

from . import browser
from .conftest import REPO, run_cli, sample_copy
from .markdown_check import rendered_actions

ARTIFACTS = REPO / "tests" / "artifacts"
WEEK = Week.parse("2026-W47")  # 16–22 Nov: the sample's own timestamps, whatever today is


@pytest.fixture(scope="module")
def warehouse(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory):
    path = sample_copy(clustered_sample, tmp_path_factory.mktemp("digest"))
    with Warehouse(path) as wh:
        draft_clusters(embedded_default(path), wh)
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


def test_a_dismissed_report_leaves_the_digest(warehouse: Warehouse) -> None:
    before = build(warehouse, WEEK)
    problem = before.top_problems[0]
    collector, record = warehouse.con.execute(
        """SELECT m.collector, m.id FROM cluster_members m JOIN records r USING (collector, id)
           WHERE m.cluster_id = ? AND r.received_at >= ? AND r.received_at < ? ORDER BY r.id LIMIT 1""",
        [problem["cluster_id"], WEEK.start, WEEK.end],
    ).fetchall()[0]
    status = warehouse.con.execute("SELECT status FROM records WHERE collector = ? AND id = ?", [collector, record]).fetchall()[0][0]
    warehouse.con.execute("UPDATE records SET status = 'dismissed' WHERE collector = ? AND id = ?", [collector, record])
    try:
        after = build(warehouse, WEEK)
        assert after.headline["reports"] == before.headline["reports"] - 1
        assert sum(s["reports"] for s in after.services) == after.headline["reports"]
        again = next(p for p in after.top_problems + after.new if p["cluster_id"] == problem["cluster_id"])
        assert again["reports"] == problem["reports"] - 1 and again["dismissed_reports"] == problem["dismissed_reports"] + 1
    finally:
        warehouse.con.execute("UPDATE records SET status = ? WHERE collector = ? AND id = ?", [status, collector, record])


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


def test_fixed_issues_and_regressions_are_reported(warehouse: Warehouse) -> None:
    cluster_id = build(warehouse, WEEK).top_problems[0]["cluster_id"]
    fixed_at = WEEK.start + timedelta(days=1)
    warehouse.con.execute(
        "UPDATE drafts SET status = 'filed', known_status = 'fixed', issue_url = 'https://github.example/acme/api/issues/7' WHERE cluster_id = ?",
        [cluster_id],
    )
    warehouse.con.execute("UPDATE clusters SET status = 'fixed', fixed_at = ? WHERE id = ?", [fixed_at, cluster_id])
    try:
        digest = build(warehouse, WEEK)
        assert [f["cluster_id"] for f in digest.fixed] == [cluster_id]
        # Reports after the fix: a regression, linked to its issue.
        assert cluster_id in {r["cluster_id"] for r in digest.regressions}
        regression = next(r for r in digest.regressions if r["cluster_id"] == cluster_id)
        assert regression["issue"]["issue_url"] == "https://github.example/acme/api/issues/7"
    finally:
        warehouse.con.execute("UPDATE drafts SET status = 'pending', known_status = NULL, issue_url = NULL WHERE cluster_id = ?", [cluster_id])
        warehouse.con.execute("UPDATE clusters SET status = 'open', fixed_at = NULL WHERE id = ?", [cluster_id])


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
    assert tags.count("svg") == len(digest.top_problems) + len(digest.new) + len(digest.rising) + len(digest.regressions) + 2
    assert not [a for _, a in parser.tags for k, v in a.items() if k in ("src", "href") and v and v.startswith(("http", "//")) and "github" not in v]


def test_chat_text_is_inert_in_slack_too() -> None:
    text = chat_text("a \\<!channel\\> @&#8203;here & <https://evil.example|click>")
    assert "<" not in text and ">" not in text and "&#8203;" not in text
    assert text == "a \\&lt;!channel\\&gt; @\u200bhere &amp; &lt;https://evil.example|click&gt;"


def test_the_markdown_quotes_agents_inert(warehouse: Warehouse) -> None:
    digest = build(warehouse, WEEK)
    digest.praise[0]["quote"] = "Love it! cc @octocat, closes #1, see https://evil.example ![x](https://evil.example/x.png)"
    markdown = render(digest, "md")
    assert "@&#8203;octocat" in markdown
    issues = {url for (url,) in warehouse.con.execute("SELECT issue_url FROM drafts WHERE issue_url IS NOT NULL").fetchall()}
    assert issues  # the sample's issue filed by hand: the one link the digest may hold
    assert rendered_actions(markdown, extra_tags={"h1", "ol", "code"}, allowed_link=issues.__contains__) == []
    assert f"# What agents told us · {WEEK}" in markdown


def test_the_command_writes_both_formats_and_posts_to_a_webhook(warehouse: Warehouse, tmp_path: Path) -> None:
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    warehouse.checkpoint()  # the command opens its own copy: a DuckDB file has one writer
    shutil.copyfile(warehouse.path, tmp_path / "feedback.duckdb")
    (tmp_path / "feedback-insights.toml").write_text(
        '[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "k"\n[digest]\nfolder = "out"\nwebhook_env = "FI_HOOK"\n'
    )
    try:
        done = run_cli("digest", "--week", str(WEEK), cwd=tmp_path,
                       env={**os.environ, "FI_HOOK": f"http://127.0.0.1:{server.server_address[1]}/hook"})
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / f"digest-{WEEK}.html").is_file() and (tmp_path / "out" / f"digest-{WEEK}.md").is_file()
    assert received == [{"text": chat_text((tmp_path / "out" / f"digest-{WEEK}.md").read_text())}]
    bad = run_cli("digest", "--week", "2026-48", cwd=tmp_path)
    assert bad.returncode == 2 and "--week: expected an ISO week like 2026-W48" in bad.stderr


def test_the_command_writes_a_digest_for_one_source_beside_the_whole_one(warehouse: Warehouse, tmp_path: Path) -> None:
    warehouse.checkpoint()
    shutil.copyfile(warehouse.path, tmp_path / "feedback.duckdb")
    (tmp_path / "feedback-insights.toml").write_text('[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "k"\n'
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


@pytest.mark.parametrize("width", [1280, 390])
def test_the_html_fits_a_desktop_and_a_phone_in_chromium(warehouse: Warehouse, width: int) -> None:
    """Rendered by Debian's headless Chromium; the screenshots stay in tests/artifacts/."""
    digest = build(warehouse, WEEK)
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / f"digest-{WEEK}.html"
    page.write_text(render(digest, "html"), encoding="utf-8")
    layout = browser.render(page, width, screenshot=ARTIFACTS / f"digest-{WEEK}-{width}px.png")
    assert layout.overflowing[:5] == [] and layout.document_width == width
    charts = len(digest.top_problems) + len(digest.new) + len(digest.rising) + len(digest.regressions) + 2
    assert layout.svg_count == charts
    assert layout.remote_resources == [] and layout.scripts == 0
    assert browser.png_size(ARTIFACTS / f"digest-{WEEK}-{width}px.png")[0] == width


def test_a_week_is_monday_midnight_to_monday_midnight(warehouse: Warehouse) -> None:
    """A report at the week's first instant is in it; one at the next Monday's is not."""
    before = {p["cluster_id"]: p for p in build(warehouse, WEEK).top_problems}
    cluster_id, row = next(iter(before.items()))
    collector, record = warehouse.con.execute(
        "SELECT collector, id FROM cluster_members WHERE cluster_id = ? LIMIT 1", [cluster_id]
    ).fetchall()[0]
    for i, moment in enumerate((WEEK.start, WEEK.end)):
        warehouse.con.execute(
            """INSERT INTO records SELECT * REPLACE (? AS id, ? AS account, ? AS received_at) FROM records
               WHERE collector = ? AND id = ?""",
            [f"edge-{i}", f"acct_edge_{i}", moment, collector, record],
        )
        warehouse.con.execute("INSERT INTO cluster_members VALUES ('reports', ?, ?, NULL, ?, 'nearest', now())",
                              [collector, f"edge-{i}", cluster_id])
    try:
        after = {p["cluster_id"]: p for p in build(warehouse, WEEK).top_problems}
        assert after[cluster_id]["accounts_this_week"] == row["accounts_this_week"] + 1
        assert after[cluster_id]["spark"][-1] == row["spark"][-1] + 1
    finally:
        warehouse.con.execute("DELETE FROM cluster_members WHERE id LIKE 'edge-%'")
        warehouse.con.execute("DELETE FROM records WHERE id LIKE 'edge-%'")


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
        '[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "k"\n[digest]\nfolder = "out"\nwebhook_env = "FI_HOOK"\n'
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
    (folder / "feedback-insights.toml").write_text('[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "k"\n')
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
        assert f"{in_digest[p['cluster_id']]} accounts this week ({p['accounts']} in all)" in markdown
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


def test_an_ignored_cluster_stays_out_of_every_ranking(warehouse: Warehouse) -> None:
    before = build(warehouse, WEEK)
    ignored = before.top_problems[0]["cluster_id"]
    goal = before.goals[0]["cluster_id"]
    warehouse.con.execute("UPDATE clusters SET status = 'ignored' WHERE id IN (?, ?)", [ignored, goal])
    try:
        after = build(warehouse, WEEK)
        ranked = after.top_problems + after.new + after.rising + after.regressions + after.praise + after.goals
        assert ignored not in {p["cluster_id"] for p in ranked} and goal not in {g["cluster_id"] for g in after.goals}
        kept = [p["cluster_id"] for p in before.top_problems if p["cluster_id"] != ignored]
        assert [p["cluster_id"] for p in after.top_problems][: len(kept)] == kept  # the next one moves up
        # Its draft is not waiting for review; the week's totals still say what arrived.
        assert ignored not in {i["cluster_id"] for i in after.issues if i["status"] != "filed"}
        assert after.headline == before.headline and after.services == before.services
    finally:
        warehouse.con.execute("UPDATE clusters SET status = 'open' WHERE id IN (?, ?)", [ignored, goal])


def test_a_cluster_that_needs_review_is_flagged_in_both_renderings(warehouse: Warehouse) -> None:
    before = build(warehouse, WEEK)
    flagged = before.top_problems[0]["cluster_id"]
    review = warehouse.con.execute("SELECT id FROM clusters WHERE needs_review").fetchall()
    warehouse.con.execute("UPDATE clusters SET needs_review = (id = ?)", [flagged])
    try:
        digest = build(warehouse, WEEK)
        assert [p["needs_review"] for p in digest.top_problems] == [p["cluster_id"] == flagged for p in digest.top_problems]
        markdown, html = render(digest, "md"), render(digest, "html")
        first = next(line for line in markdown.splitlines() if line.startswith("1. "))
        assert "· needs review" in first and markdown.count("needs review") == 1 + sum(
            p["cluster_id"] == flagged for p in digest.new + digest.rising)
        assert html.count(">needs review</span>") == 1 + sum(
            p["cluster_id"] == flagged for p in digest.new + digest.rising + digest.regressions)
    finally:
        warehouse.con.execute("UPDATE clusters SET needs_review = list_contains(?, id)", [[i for (i,) in review]])
