"""The drafting stage and maintainer review, on the clustered sample (template drafting)."""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from feedback_insights.clusters import demand
from feedback_insights.config import Config, DraftsConfig, EvidenceLinks, embedded_default
from feedback_insights.drafts import (
    MAX_BODY,
    DraftError,
    DraftInput,
    ReviewError,
    approve,
    cluster_of,
    crosses_threshold,
    draft_cluster,
    draft_clusters,
    draft_input,
    edit_form,
    get_draft,
    history,
    neutralise,
    reject,
    render_body,
    save_edit,
)
from feedback_insights.drafts._render import TITLE_CHARS, normalise_title
from feedback_insights.drafts._stage import DRAFTED
from feedback_insights.warehouse import Warehouse

from .conftest import sample_copy
from .markdown_check import TEMPLATE, active_elements

LINKS = EvidenceLinks(
    request_id="https://console.example/requests/{request_id}",
    trace_id="https://console.example/trace?id={trace_id}",
    session_id="https://console.example/sessions/{session_id}",
)


#: The sources whose reports a body says were observed, not written.
OBSERVED = ("server_observed", "runtime_observed")


def _config(path: Path, **drafts: object) -> Config:
    return embedded_default(path).model_copy(update={"drafts": DraftsConfig(links=LINKS, **drafts)})


@pytest.fixture
def warehouse(clustered_sample: Path, tmp_path: Path):
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        yield wh


def _who(wh: Warehouse, cluster_id: int) -> str:
    """Who a cluster's body says reported it ("Agents", "People" …), from its records' sources."""
    sources = wh.con.execute(
        "SELECT r.source FROM cluster_members m JOIN records r USING (collector, id) WHERE m.view = 'reports' AND m.cluster_id = ?",
        [cluster_id],
    ).fetchall()
    return neutralise.reporters(source for (source,) in sources)


def _drafts(wh: Warehouse) -> list[dict]:
    """Our own drafts, not the one following an issue the sample's owner filed by hand."""
    return wh.con.sql("SELECT * FROM drafts WHERE drafted_by <> 'hand' ORDER BY cluster_id").pl().to_dicts()


def _filed_by_hand(wh: Warehouse) -> dict[int, str]:
    """Cluster → the issue a report in it says it was filed as, by hand."""
    rows = wh.con.execute(
        """SELECT m.cluster_id, min(r.issue_url) FROM cluster_members m JOIN records r USING (collector, id)
           WHERE m.view = 'reports' AND m.cluster_id IS NOT NULL AND r.status = 'filed' GROUP BY ALL"""
    ).fetchall()
    return dict(rows)


def test_clusters_over_the_threshold_get_exactly_one_draft(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    figures = demand(warehouse)
    over = {
        row["cluster_id"]: row["needs_review"] for row in figures.iter_rows(named=True)
        if row["polarity"] in DRAFTED and row["status"] == "open" and crosses_threshold(row, config.drafts)
    }
    expected = {cluster for cluster, review in over.items() if not review}
    assert len(expected) >= 10  # the sample's planted problems
    by_hand = _filed_by_hand(warehouse)
    assert by_hand  # attached whatever their demand (below)
    run = draft_clusters(config, warehouse)
    drafts = _drafts(warehouse)
    # A cluster that needs review is left for a maintainer (drafts create), unless filed by hand.
    assert {d["cluster_id"] for d in drafts} == expected - set(by_hand)
    assert sorted(run.held) == sorted(set(over) - expected - set(by_hand))
    assert len(run.drafted) == len(drafts) and run.refreshed == []
    # A cluster its owner already filed by hand follows that issue instead of getting a draft.
    attached = warehouse.con.sql("SELECT * FROM drafts WHERE drafted_by = 'hand'").pl().to_dicts()
    assert {d["cluster_id"]: d["issue_url"] for d in attached} == by_hand and len(run.attached) == len(by_hand)
    assert all(d["status"] == "filed" and cluster_of(d["body"]) == d["cluster_id"] for d in attached)
    assert all(d["status"] == "pending" and d["drafted_by"] == "template" for d in drafts)
    # Praise and goal themes never become issues; problems and requests do, a request as a
    # feature request with its own label; a blocking cluster needs only 2 accounts.
    kinds = warehouse.con.execute(
        """SELECT DISTINCT c.view, c.polarity, d.labels FROM drafts d JOIN clusters c ON c.id = d.cluster_id
           WHERE d.drafted_by <> 'hand' ORDER BY ALL"""
    ).fetchall()
    assert kinds == [("reports", "problem", ["agent-feedback"]), ("reports", "request", ["agent-feedback", "enhancement"])]
    again = draft_clusters(config, warehouse)
    assert again.drafted == again.refreshed == again.attached == [] and _drafts(warehouse) == drafts


def test_the_threshold_is_configurable(warehouse: Warehouse) -> None:
    draft_clusters(_config(warehouse.path, min_accounts=8, min_accounts_blocking=8), warehouse)
    accounts = [d["accounts"] for d in _drafts(warehouse)]
    assert accounts and min(accounts) >= 8


def test_a_body_carries_demand_attribution_quotes_and_evidence_links(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    draft_clusters(config, warehouse)
    figures = {row["cluster_id"]: row for row in demand(warehouse).iter_rows(named=True)}
    for draft in _drafts(warehouse):
        body, row = draft["body"], figures[draft["cluster_id"]]
        assert cluster_of(body) == draft["cluster_id"]
        inputs = draft_input(warehouse, row)
        request = row["polarity"] == "request"
        said = "asked for this in" if request else "reported this problem with"
        assert f"{_who(warehouse, draft['cluster_id'])} from **{row['accounts']} accounts** {said} **{row['service']}**" in body
        assert ("## What agents asked for" in body) == request and ("## Representative reports" in body) != request
        html = MarkdownIt("gfm-like").render(body)
        demand_row = re.search(r"<tbody>\s*<tr>(.*?)</tr>", html, re.DOTALL).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", demand_row)
        assert cells[:4] == [str(row["accounts"]), str(row["accounts_this_week"]), str(row["accounts_last_week"]), str(row["reports"])]
        (distinct,) = warehouse.con.execute(
            """SELECT count(*) FROM cluster_members m JOIN records r ON r.collector = m.collector AND r.id = m.id
               WHERE m.view = 'reports' AND m.cluster_id = ? AND r.duplicate_of IS NULL""", [draft["cluster_id"]]
        ).fetchall()[0]
        quoted = inputs.reports[: config.drafts.quoted_reports]
        assert len(quoted) == min(distinct, config.drafts.quoted_reports)
        for report in quoted:  # each attributed by its source (an agent or a person asked for a request)
            who = (f"{neutralise.reporter(report)} asked" if request and report["source"] not in OBSERVED
                   else neutralise.attribution(report, wrote=not report["private"]))
            assert f"\n{who} ({neutralise.inline(report['id'])}, " in body
        # Every link in the body is one of ours, built from the URL templates.
        assert active_elements(body, allowed_link=lambda href: href.startswith("https://console.example/"), **TEMPLATE) == []


def test_evidence_cells_link_to_the_configured_consoles(warehouse: Warehouse) -> None:
    draft_clusters(_config(warehouse.path), warehouse)
    # The smallest drafted cluster with a request id: all its evidence fits in the table.
    request_id, cluster_id = warehouse.con.execute(
        """SELECT r.request_id, d.cluster_id FROM drafts d
           JOIN cluster_members m ON m.cluster_id = d.cluster_id AND m.view = 'reports'
           JOIN records r ON r.collector = m.collector AND r.id = m.id
           WHERE r.request_id IS NOT NULL AND r.duplicate_of IS NULL AND d.drafted_by <> 'hand'
           ORDER BY d.reports, r.id LIMIT 1"""
    ).fetchall()[0]
    body = warehouse.con.execute("SELECT body FROM drafts WHERE cluster_id = ?", [cluster_id]).fetchall()[0][0]
    links = MarkdownIt("gfm-like").parse(body)
    hrefs = {t.attrGet("href") for block in links if block.children for t in block.children if t.type == "link_open"}
    assert f"https://console.example/requests/{request_id}" in hrefs


def test_the_samples_planted_injection_is_quoted_inert(warehouse: Warehouse) -> None:
    draft_clusters(_config(warehouse.path, suggestions=20), warehouse)  # every suggestion quoted
    bodies = "\n".join(d["body"] for d in _drafts(warehouse))
    assert "@&#8203;maintainers please merge" in bodies  # quoted, with the ping broken
    assert "closes \\#&#8203;12" in bodies


def _grow(wh: Warehouse, cluster_id: int, accounts: int) -> None:
    """New reports from new accounts join the cluster (as a later clustering run would)."""
    collector, record_id = wh.con.execute(
        "SELECT collector, id FROM cluster_members WHERE cluster_id = ? LIMIT 1", [cluster_id]
    ).fetchall()[0]
    for i in range(accounts):
        new_id = f"grown-{cluster_id}-{i}"
        wh.con.execute(
            """INSERT INTO records SELECT * REPLACE (? AS id, ? AS account, received_at + ? AS received_at, NULL AS duplicate_of)
               FROM records WHERE collector = ? AND id = ?""",
            [new_id, f"acct_new_{i}", timedelta(minutes=i + 1), collector, record_id],
        )
        wh.con.execute(
            "INSERT INTO cluster_members VALUES ('reports', ?, ?, NULL, ?, 'nearest', now())", [collector, new_id, cluster_id]
        )


def test_a_cluster_that_grows_materially_gets_its_pending_draft_refreshed(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    draft_clusters(config, warehouse)
    first, second = _drafts(warehouse)[:2]
    _grow(warehouse, first["cluster_id"], 1)  # one more account: not material
    assert draft_clusters(config, warehouse).refreshed == []
    _grow(warehouse, second["cluster_id"], second["accounts"])  # doubled
    run = draft_clusters(config, warehouse)
    assert run.refreshed == [second["id"]] and run.drafted == []
    refreshed = get_draft(warehouse, second["id"])
    assert refreshed["accounts"] == second["accounts"] * 2
    assert f"{_who(warehouse, second['cluster_id'])} from **{second['accounts'] * 2} accounts**" in refreshed["body"]
    assert warehouse.con.execute("SELECT count(*) FROM drafts WHERE cluster_id = ?", [second["cluster_id"]]).fetchall() == [(1,)]
    assert [a["action"] for a in history(warehouse, second["id"])] == ["drafted", "refreshed"]


def test_a_report_dismissed_in_triage_leaves_a_pending_draft(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    draft_clusters(config, warehouse)
    pending, edited = _drafts(warehouse)[:2]
    save_edit(warehouse, edited["id"], "maria", edit_form(edited).replace(edited["title"], "Kept as written", 1))
    for draft in (pending, edited):  # the first report each quotes (what a template draft cites)
        collector, record_id = draft["cited"][0].split(":", 1)
        warehouse.con.execute("UPDATE records SET status = 'dismissed' WHERE collector = ? AND id = ?", [collector, record_id])
    run = draft_clusters(config, warehouse)
    after = {d["id"]: d for d in _drafts(warehouse)}
    assert run.refreshed == [pending["id"]]  # an edited draft keeps its maintainer's text
    assert pending["cited"][0] not in after[pending["id"]]["cited"] and after[pending["id"]]["cited"]
    assert after[edited["id"]]["title"] == "Kept as written"
    assert draft_clusters(config, warehouse).refreshed == []  # once redrafted, it stays


def test_an_edited_or_approved_draft_keeps_its_text_when_the_cluster_grows(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    draft_clusters(config, warehouse)
    edited, approved = _drafts(warehouse)[:2]
    save_edit(warehouse, edited["id"], "maria", edit_form(edited).replace(edited["title"], "Better title", 1))
    approve(warehouse, approved["id"], "maria")
    for d in (edited, approved):
        _grow(warehouse, d["cluster_id"], d["accounts"] * 2)
    assert draft_clusters(config, warehouse).refreshed == []
    assert get_draft(warehouse, edited["id"])["title"] == "Better title"
    assert get_draft(warehouse, approved["id"])["body"] == approved["body"]


def test_review_records_who_and_when_and_refuses_what_makes_no_sense(warehouse: Warehouse) -> None:
    draft_clusters(_config(warehouse.path), warehouse)
    one, two = _drafts(warehouse)[:2]
    approve(warehouse, one["id"], "maria")
    approved = get_draft(warehouse, one["id"])
    assert approved["status"] == "approved" and approved["reviewed_by"] == "maria" and approved["reviewed_at"]
    with pytest.raises(ReviewError, match="only a pending or rejected draft can be approved"):
        approve(warehouse, one["id"], "maria")
    with pytest.raises(ReviewError, match="--reason"):
        reject(warehouse, two["id"], "maria", "  ")
    reject(warehouse, two["id"], "li", "duplicate of acme/api#40")
    assert get_draft(warehouse, two["id"])["reject_reason"] == "duplicate of acme/api#40"
    assert [(a["action"], a["actor"]) for a in history(warehouse, two["id"])] == [("drafted", "feedback-insights"), ("rejected", "li")]
    with pytest.raises(ReviewError, match="no draft 999"):
        approve(warehouse, 999, "maria")


def test_an_edit_sets_the_workaround_and_keeps_the_marker(warehouse: Warehouse) -> None:
    draft_clusters(_config(warehouse.path), warehouse)
    draft = _drafts(warehouse)[0]
    form = edit_form(draft)
    form = form.replace("workaround: \n", "workaround: Use /jobs?role=gtm and join on company_id\n")
    form = form.replace("labels: agent-feedback", "labels: agent-feedback, search")
    form = form.replace(f"<!-- feedback-insights:cluster={draft['cluster_id']} -->\n", "")  # deleted by mistake
    # The marker is put back, so the body is unchanged.
    assert save_edit(warehouse, draft["id"], "maria", form) == ["labels", "workaround"]
    saved = get_draft(warehouse, draft["id"])
    assert saved["workaround"] == "Use /jobs?role=gtm and join on company_id"
    assert saved["labels"] == ["agent-feedback", "search"] and saved["edited"]
    assert cluster_of(saved["body"]) == draft["cluster_id"]
    assert save_edit(warehouse, draft["id"], "maria", edit_form(saved)) == []


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ("title: x\nbody without separator", "is missing"),
        ("title: x\nowner: me\n--- body (markdown) below this line ---\nbody", "line 2: expected one of"),
        ("title:\n--- body (markdown) below this line ---\nbody", "title: must not be empty"),
        ("title: x\n--- body (markdown) below this line ---\n  \n", "body: must not be empty"),
    ],
)
def test_a_bad_edit_is_refused_with_the_line(warehouse: Warehouse, form: str, message: str) -> None:
    draft_clusters(_config(warehouse.path), warehouse)
    draft = _drafts(warehouse)[0]
    with pytest.raises(ReviewError, match=message):
        save_edit(warehouse, draft["id"], "maria", form)
    assert get_draft(warehouse, draft["id"])["body"] == draft["body"]


def test_a_body_stays_within_githubs_limit_however_long_the_reports(warehouse: Warehouse) -> None:
    figures = demand(warehouse).filter(demand(warehouse)["polarity"] == "problem").row(0, named=True)
    inputs = draft_input(warehouse, figures)
    huge = "#1 @a <b> " * 2_000  # every character escapes to several
    reports = [{**r, **dict.fromkeys(("summary", "detail", "expected", "actual", "suggestion"), f"{i} {huge}")}
               for i, r in enumerate(inputs.reports * 5)]
    settings = DraftsConfig(quote_chars=10_000, quoted_reports=50, suggestions=20, evidence_rows=500)
    body = render_body(DraftInput(**{**asdict(inputs), "reports": reports}), settings)
    assert len(body) <= MAX_BODY and cluster_of(body) == inputs.cluster_id
    assert active_elements(body, **TEMPLATE) == []


def _over_threshold(wh: Warehouse, config: Config) -> list[dict]:
    """Open problem clusters over the drafting threshold, not filed by hand, most accounts first."""
    by_hand = _filed_by_hand(wh)
    return [row for row in demand(wh).sort("accounts", descending=True).iter_rows(named=True)
            if row["polarity"] == "problem" and row["status"] == "open" and crosses_threshold(row, config.drafts)
            and row["cluster_id"] not in by_hand]


def test_a_cluster_that_needs_review_waits_for_a_maintainer(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    warehouse.con.execute("UPDATE clusters SET needs_review = false")
    held = _over_threshold(warehouse, config)[0]["cluster_id"]
    warehouse.con.execute("UPDATE clusters SET confidence = 0.31, needs_review = true WHERE id = ?", [held])
    run = draft_clusters(config, warehouse)
    assert run.held == [held] and held not in {d["cluster_id"] for d in _drafts(warehouse)}
    assert f"1 cluster needs review before drafting: drafts create {held}" in run.line()
    assert draft_clusters(config, warehouse).held == [held]  # still waiting, still no draft
    draft_id = draft_cluster(config, warehouse, held, "maria")
    drafted = get_draft(warehouse, draft_id)
    assert drafted["cluster_id"] == held and drafted["status"] == "pending" and cluster_of(drafted["body"]) == held
    assert [(a["action"], a["actor"]) for a in history(warehouse, draft_id)] == [("drafted", "maria")]
    assert draft_clusters(config, warehouse).held == []  # drafted: the stage refreshes it like any other
    with pytest.raises(DraftError, match=f"already has draft {draft_id} \\(pending\\)"):
        draft_cluster(config, warehouse, held, "maria")


def test_a_maintainer_drafts_only_live_problem_clusters(warehouse: Warehouse) -> None:
    config = _config(warehouse.path)
    kinds = dict(warehouse.con.execute(
        "SELECT polarity || '/' || view, min(id) FROM clusters WHERE status = 'open' GROUP BY ALL").fetchall())
    small = next(row["cluster_id"] for row in demand(warehouse).iter_rows(named=True)
                 if row["polarity"] == "problem" and not crosses_threshold(row, config.drafts))
    ignored = _over_threshold(warehouse, config)[0]["cluster_id"]
    warehouse.con.execute("UPDATE clusters SET status = 'ignored' WHERE id = ?", [ignored])
    with pytest.raises(DraftError, match="no cluster 99999"):
        draft_cluster(config, warehouse, 99999, "maria")
    with pytest.raises(DraftError, match="praise cluster: only problems and requests are drafted"):
        draft_cluster(config, warehouse, kinds["praise/reports"], "maria")
    with pytest.raises(DraftError, match="goal theme cluster"):
        draft_cluster(config, warehouse, kinds["problem/goals"], "maria")
    with pytest.raises(DraftError, match=f"cluster {ignored} is ignored: clusters unignore {ignored} first"):
        draft_cluster(config, warehouse, ignored, "maria")
    # Under the threshold is the maintainer's call; a request is drafted as a feature request.
    assert get_draft(warehouse, draft_cluster(config, warehouse, small, "maria"))["cluster_id"] == small
    request = get_draft(warehouse, draft_cluster(config, warehouse, kinds["request/reports"], "maria"))
    assert request["labels"] == ["agent-feedback", "enhancement"] and "## What agents asked for" in request["body"]


def test_titles_are_the_clusters_name_tool_or_endpoint_then_symptom(warehouse: Warehouse) -> None:
    draft_clusters(_config(warehouse.path), warehouse)
    drafts = _drafts(warehouse)
    named = dict(warehouse.con.execute(
        """SELECT c.id, c.label FROM clusters c WHERE c.label IS NOT NULL AND c.label NOT LIKE '% · %'""").fetchall())
    tools = dict(warehouse.con.execute(
        """SELECT cluster_id, list(tool ORDER BY n DESC, tool)[1] FROM (
               SELECT m.cluster_id, r.tool, count(*) AS n, sum(count(*)) OVER (PARTITION BY m.cluster_id) AS members
               FROM cluster_members m JOIN records r USING (collector, id) WHERE m.view = 'reports'
               GROUP BY m.cluster_id, r.tool)
           WHERE tool IS NOT NULL AND 2 * n >= members GROUP BY cluster_id""").fetchall())
    # An owner-private report's words name nothing that leaves the warehouse: its cluster is
    # titled by a neutral name (its service, the category in words, shared terms).
    private = {cluster_id: summaries for cluster_id, summaries in warehouse.con.execute(
        """SELECT m.cluster_id, list(r.summary) FROM cluster_members m JOIN records r USING (collector, id)
           WHERE m.view = 'reports' AND r.collector = 'sample-session' GROUP BY 1""").fetchall()}
    for d in drafts:
        title = d["title"]
        assert len(title) <= TITLE_CHARS and not title.endswith(".") and "\n" not in title
        if d["cluster_id"] in private:
            assert title.startswith("pags-console: ") and not any(s and s in title for s in private[d["cluster_id"]])
            continue
        assert title == normalise_title(named[d["cluster_id"]])  # the cluster's name is the title
        if tool := tools.get(d["cluster_id"]):  # which names the tool most of its reports name
            assert tool in title.replace("`", "")
    assert sum(d["cluster_id"] in tools for d in drafts) >= len(drafts) // 2  # the agent-authored services' tools


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/contacts/export: bare 400 names no field.", "/contacts/export: bare 400 names no field"),
        ("search_files: glob ignored...", "search_files: glob ignored"),
        ("  create_item:\n  fails   silently  ", "create_item: fails silently"),
        ("/jobs: the cursor repeats page two when the page size is changed between two calls, again and again",
         "/jobs: the cursor repeats page two when the page size is changed between two…"),
        ("/jobs: " + "x" * 100, "/jobs: " + "x" * 72 + "…"),  # one long word: cut inside it
        ("@octocat: closes #1 see https://evil.example", "@\u200boctocat: closes #\u200b1 see https\u200b://evil.example"),
    ],
)
def test_a_title_has_no_trailing_period_and_is_cut_at_a_word(text: str, expected: str) -> None:
    assert normalise_title(text) == expected
    assert len(normalise_title(text)) <= TITLE_CHARS + expected.count("\u200b")
