"""Nothing vanishes, and requests stand apart: the reports in no cluster are in ``clusters list
--unclustered``, on the desk's page and in the digest (counted, a few examples per service);
clusters of polarity ``request`` are listed apart from problems and praise by the desk, the
digest and ``clusters list``."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from feedback_insights.cli._clusters import UNCLUSTERED
from feedback_insights.clusters import unclustered
from feedback_insights.config import DeskConfig, embedded_default
from feedback_insights.desk import create_app
from feedback_insights.digest import Week, build, render, render_email, webhook_text
from feedback_insights.warehouse import Warehouse

from .conftest import REPO, drafted_copy, run_cli, sample_copy

sys.path.insert(0, str(REPO / "benchmarks"))
from planted import truth_by_record  # noqa: E402  (the sample's truth, matched to its records)

WEEK = Week.parse("2026-W48")


@pytest.fixture(scope="module")
def folder(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A drafted copy of the sample, as ``feedback.duckdb`` of a folder the CLI runs in."""
    folder = tmp_path_factory.mktemp("apart")
    drafted_copy(clustered_sample, folder)
    return folder


@pytest.fixture
def own(folder: Path, tmp_path: Path) -> Path:
    """A copy of the module's folder, for a test that changes it."""
    sample_copy(folder / "feedback.duckdb", tmp_path)
    return tmp_path


def _desk(folder: Path) -> TestClient:
    config = embedded_default(folder / "feedback.duckdb").model_copy(update={"desk": DeskConfig(reviewer="rita")})
    return TestClient(create_app(config, "127.0.0.1", None), base_url="http://127.0.0.1:8790")


@pytest.fixture(scope="module")
def desk(folder: Path) -> Iterator[TestClient]:
    with _desk(folder) as client:
        yield client


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _section(html: str, heading: str) -> str:
    """The ``<section>`` of a desk list headed ``heading`` ("" when there is none)."""
    return next((s for s in html.split("<section")[1:] if re.search(rf'id="kind-\d+">{heading} ', s)), "")


# -- nothing vanishes --------------------------------------------------------------------------


def test_every_report_is_in_a_cluster_or_listed_in_none(folder: Path) -> None:
    with Warehouse(folder / "feedback.duckdb") as wh:
        live = {f"{c}:{i}" for c, i in wh.con.execute(
            "SELECT collector, id FROM records WHERE status IS DISTINCT FROM 'dismissed'").fetchall()}
        clustered = {f"{c}:{i}" for c, i in wh.con.execute(
            "SELECT collector, id FROM cluster_members WHERE view = 'reports' AND cluster_id IS NOT NULL").fetchall()}
        truth = truth_by_record(wh.con)
        alone = unclustered(wh)
    done = run_cli("clusters", "list", "--unclustered", "--json", "-n", "0", cwd=folder)
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    assert listed and all(list(row) == list(UNCLUSTERED) for row in listed)
    ids = {f"{row['collector']}:{row['id']}" for row in listed}
    assert ids == {f"{c}:{i}" for c, i in alone.select("collector", "id").iter_rows()}
    assert ids | clustered == live and not ids & clustered
    # The case: the 16 voice-transcription complaints were in no cluster, draft or digest.
    voice = {i for i, t in truth.items() if t["problem"] == "pags.voice_misheard"}
    assert len(voice) == 16 and {i.split(":", 1)[1] for i in ids | clustered} >= voice
    assert {"no near duplicate", "too few words"} <= {row["why"] for row in listed}
    assert not any(row.get("account") for row in listed)  # never an account, only whether there is none
    table = run_cli("clusters", "list", "--unclustered", cwd=folder)
    assert table.returncode == 0, table.stderr
    assert f"{len(listed)} reports in no cluster (pags-console " in table.stdout


def test_why_a_report_is_in_no_cluster(own: Path) -> None:
    with Warehouse(own / "feedback.duckdb") as wh:
        before = unclustered(wh)
        alone = before.filter(before["why"] == "no near duplicate").head(2)
        (first, second) = [(c, i) for c, i in alone.select("collector", "id").iter_rows()]
        for record in (first, second):
            wh.con.execute("DELETE FROM cluster_members WHERE view = 'reports' AND collector = ? AND id = ?", list(record))
        wh.con.execute("UPDATE records SET service = NULL WHERE collector = ? AND id = ?", list(second))
        member = wh.con.execute(
            """SELECT m.collector, m.id FROM cluster_members m JOIN records r USING (collector, id)
               WHERE m.view = 'reports' AND m.cluster_id IS NOT NULL ORDER BY m.id LIMIT 1""").fetchall()[0]
        wh.con.execute("UPDATE cluster_members SET cluster_id = NULL WHERE view = 'reports' AND collector = ? AND id = ?",
                       list(member))
        dismissed = before.filter(before["why"] == "too few words").row(0, named=True)
        wh.con.execute("UPDATE records SET status = 'dismissed' WHERE collector = ? AND id = ?",
                       [dismissed["collector"], dismissed["id"]])
        why = {(c, i): w for c, i, w in unclustered(wh).select("collector", "id", "why").iter_rows()}
    assert why[first] == "not clustered yet" and why[second] == "no service"
    assert member in why  # a report taken out of its cluster is listed
    assert (dismissed["collector"], dismissed["id"]) not in why  # dismissed in triage: no demand, not listed
    assert len(why) == before.height  # one more taken out of its cluster, one fewer dismissed


def test_the_desk_lists_the_reports_in_no_cluster(desk: TestClient, folder: Path) -> None:
    with Warehouse(folder / "feedback.duckdb") as wh:
        alone = unclustered(wh)
    html = desk.get("/unclustered").text
    assert '<a href="/unclustered"' in html  # in the navigation of every page
    for collector, record in alone.select("collector", "id").iter_rows():
        assert f"<code>{collector}:{record}</code>" in html
    text = _text(html)
    assert f"{alone.height} reports" in text and "no near duplicate" in text and "too few words" in text
    pags = desk.get("/unclustered?service=pags-console").text
    services = set(re.findall(r"<p class=\"report-meta\">.*? · (\S+) · ", pags))
    assert services == {"pags-console"}
    assert pags.count('class="report-meta"') == alone.filter(alone["service"] == "pags-console").height
    assert "Speech to text is unreliable" in _text(pags)  # a voice complaint no cluster holds
    assert 'href="/unclustered">reports in no cluster' in desk.get("/clusters").text


def test_the_digest_counts_the_week_s_reports_in_no_cluster(folder: Path) -> None:
    with Warehouse(folder / "feedback.duckdb") as wh:
        digest = build(wh, WEEK)
        alone = unclustered(wh, start=WEEK.start, end=WEEK.end)
    assert digest.unclustered_total == alone.height > 0
    per_service = {s["service"]: s for s in digest.unclustered}
    assert set(per_service) == set(alone["service"].unique())
    for service, row in per_service.items():
        assert row["reports"] == alone.filter(alone["service"] == service).height
        assert 0 < len(row["examples"]) <= 3
    markdown = render(digest, "md")
    section = markdown.split("## Reports in no cluster", 1)[1].split("\n## ", 1)[0]
    assert f"{alone.height} reports this week are in no cluster" in section
    for service, row in per_service.items():
        assert f"**{service}**: {row['reports']} reports" in section
    quoted = [e["quote"] for row in digest.unclustered for e in row["examples"] if e["quote"]]
    assert quoted and all(q[:30].replace("_", "\\_") in section for q in quoted)
    html, text, _ = render_email(digest)
    assert "Reports in no cluster" in html and f"{alone.height} reports this week are in no cluster" in text
    assert f"{alone.height} reports this week are in no cluster" in webhook_text(digest, "slack")


# -- requests apart ---------------------------------------------------------------------------


def test_requests_are_listed_apart_from_problems_and_praise(own: Path) -> None:
    with Warehouse(own / "feedback.duckdb") as wh:
        before = build(wh, WEEK)
        request = before.top_problems[1]
        wh.con.execute("UPDATE clusters SET polarity = 'request' WHERE id = ?", [request["cluster_id"]])
        (draft,) = wh.con.execute("SELECT id FROM drafts WHERE cluster_id = ?", [request["cluster_id"]]).fetchall()[0]
        digest = build(wh, WEEK)
    cluster = request["cluster_id"]
    assert cluster in {r["cluster_id"] for r in digest.requests}
    assert all(r["polarity"] == "request" for r in digest.requests)
    assert cluster not in {p["cluster_id"] for p in digest.regressions + digest.top_problems + digest.new + digest.rising}
    markdown = render(digest, "md")
    asks = markdown.split("## What agents ask for", 1)[1].split("\n## ", 1)[0]
    top = markdown.split("## Top problems", 1)[1].split("\n## ", 1)[0]
    name = request["name"].replace("_", "\\_")
    assert name in asks and name not in top
    with _desk(own) as client:
        table = client.get("/clusters").text
        queue = client.get("/drafts").text
    assert f'href="/clusters/{cluster}"' in _section(table, "Requests")
    assert f'href="/clusters/{cluster}"' not in _section(table, "Problems") + _section(table, "Praise")
    assert _section(table, "Praise") and _section(table, "Problems")
    assert f'href="/drafts/{draft}"' in _section(queue, "Requests")
    assert f'href="/drafts/{draft}"' not in _section(queue, "Problems")
    done = run_cli("clusters", "list", "--kind", "request", "--json", "-n", "0", cwd=own)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert cluster in {row["cluster_id"] for row in rows} and {row["polarity"] for row in rows} == {"request"}
    problems = run_cli("clusters", "list", "--kind", "problem", "--json", "-n", "0", cwd=own)
    assert cluster not in {json.loads(line)["cluster_id"] for line in problems.stdout.splitlines()}
    bad = run_cli("clusters", "list", "--kind", "bug", cwd=own)
    assert bad.returncode == 2 and "--kind must be one of: problem, request, praise" in bad.stderr
