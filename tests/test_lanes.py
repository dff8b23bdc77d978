"""Lane mapping per dialect against each seed's own definitions (issue 29: suggestions are demand).

Every case quotes the definition it follows. A suggestion is a ``feature_request`` in every
dialect; words of praise stay praise; an in-session row without a sentiment takes its lane from
its words. Then what the lanes become: the reports view's partitions (``request`` apart from
problems and praise), and a request cluster drafted as a feature request, praise never.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from feedback_insights.clusters import demand, rebuild
from feedback_insights.clusters._stage import polarity_sql
from feedback_insights.config import ClusteringConfig, DraftsConfig
from feedback_insights.core.vocabulary import asks_for_change, reads_as_praise
from feedback_insights.drafts import draft_input, template_draft
from feedback_insights.warehouse import Warehouse

from .conftest import sample_copy
from .test_dialects import RFC026, SESSION_ROW, normalise

AFP = {"goal": "Export the account list", "message": "placeholder", "endpoint": "/contacts/export"}


def _afp(**fields: Any) -> str:
    return normalise({**AFP, **fields}, "afp")[0]["lane"]


@pytest.mark.parametrize(
    ("fields", "lane"),
    [
        # outcome "completed: completed fine; the feedback is a suggestion" (feedback.schema.json)
        ({"type": "other", "outcome": "completed", "message": "Please add a CSV export option"}, "feature_request"),
        ({"type": "other", "outcome": "completed", "message": "Exports work.", "suggestion": "Offer CSV as well"},
         "feature_request"),
        ({"type": "performance", "outcome": "completed", "message": "Exports of 10k rows take 40 s"}, "feature_request"),
        ({"type": "unhelpful_error", "outcome": "completed", "message": "It would help if the 400 named the field"},
         "feature_request"),
        # … words of praise among them stay praise: AFP has no praise type, agents file it as other
        ({"type": "other", "outcome": "completed", "message": "Impressed by how fast search is"}, "positive_feedback"),
        ({"type": "other", "outcome": "completed", "message": "Content search returns in under a second"},
         "positive_feedback"),
        ({"type": "performance", "outcome": "completed", "message": "Search latency is excellent, a real pleasure"},
         "positive_feedback"),
        # "blocked: the task could not be completed": a bug, its "please add" the remedy
        ({"type": "other", "outcome": "blocked", "message": "Please add a CSV export option"}, "bug_or_failure"),
        # "degraded: completed, but worse or slower than it should have been": friction, unless it asks
        ({"type": "other", "outcome": "degraded", "message": "The export was slow"}, "friction"),
        ({"type": "other", "outcome": "degraded", "message": "It would be nice if exports were async"}, "feature_request"),
        ({"type": "performance", "outcome": "degraded", "message": "Please add async exports"}, "friction"),
        # the types with a lane of their own keep it, whatever the outcome
        ({"type": "missing_capability", "outcome": "blocked", "message": "No hiring-role filter"}, "feature_request"),
        ({"type": "bug", "outcome": "completed", "message": "The total is off by one"}, "bug_or_failure"),
        ({"type": "unclear_documentation", "outcome": "completed", "message": "Please document the limit"},
         "docs_feedback"),
    ],
)
def test_afp_lanes_follow_the_schemas_outcomes(fields: dict[str, Any], lane: str) -> None:
    assert _afp(**fields) == lane


def _afs(**fields: Any) -> str:
    return normalise({"tool_name": "export", **fields}, "afs")[0]["lane"]


@pytest.mark.parametrize(
    ("fields", "lane"),
    [
        # feature_request: "a capability, field, mode, or endpoint the agent wanted"; the lane is
        # "derived from category, outcome, and sentiment when omitted", and a please is no praise
        ({"outcome": "success", "summary": "Please add a CSV export option"}, "feature_request"),
        ({"outcome": "success", "summary": "Please add a CSV export option", "satisfaction_score": 5}, "feature_request"),
        ({"outcome": "success", "summary": "Exports work", "suggested_fix": "Offer CSV as well"}, "feature_request"),
        ({"outcome": "partial_success", "summary": "It would be nice if exports were async"}, "feature_request"),
        ({"outcome": "success", "summary": "Search is fast and the filters just work"}, "positive_feedback"),
        # a failed task's request is the remedy of a bug; a friction category names the friction
        ({"outcome": "failure", "summary": "Please add retries, the export died"}, "bug_or_failure"),
        ({"outcome": "success", "category": "unhelpful_error", "summary": "Please add the field name"}, "friction"),
        ({"outcome": "failure", "category": "missing_capability", "summary": "No CSV export"}, "feature_request"),
        # a lane the agent names is the lane
        ({"feedback_type": "positive_feedback", "outcome": "success", "summary": "Please add CSV"}, "positive_feedback"),
        ({"feedback_type": "enhancement", "summary": "CSV export"}, "feature_request"),
    ],
)
def test_afs_lanes_derive_requests_before_praise(fields: dict[str, Any], lane: str) -> None:
    assert _afs(**fields) == lane


def _sep(item: dict[str, Any]) -> str:
    return normalise({"feedbackVersion": "0.1", "items": [item]}, "afs")[0]["lane"]


@pytest.mark.parametrize(
    ("item", "lane"),
    [
        # the spec's table: capability_gap → missing_capability (→ feature_request)
        ({"category": "capability_gap", "toolName": "get_record"}, "feature_request"),
        # interoperability → other: its observation decides, like any report with no friction category
        ({"category": "interoperability", "observation": "Please support ids[] like the REST API does"},
         "feature_request"),
        ({"category": "interoperability", "observation": "search then fetch, one item at a time"}, "friction"),
        # efficiency → pagination_or_truncation names the friction, whatever the words ask
        ({"category": "efficiency", "observation": "Please add a batch get"}, "friction"),
    ],
)
def test_sep2369_items_ask_only_where_the_category_leaves_it_open(item: dict[str, Any], lane: str) -> None:
    assert _sep(item) == lane


def _session(sentiment: str | None, body: str) -> tuple[str, str, int | None]:
    record = normalise({**SESSION_ROW, "sentiment": sentiment, "body": body}, "session")[0]
    return record["lane"], record["category"], record["rating"]


@pytest.mark.parametrize(
    ("sentiment", "body", "expected"),
    [
        # "Feedback is the class where the platform is at fault": a row is a bug unless it says otherwise
        ("bad", "Please add a way to undo", ("bug_or_failure", "incorrect_response", 1)),
        ("good", "Exactly what I wanted", ("positive_feedback", "other", 5)),
        ("good", "Great, and it would help if it linked the trace too", ("feature_request", "missing_capability", 5)),
        # "sentiment: 'bad' | 'good' | NULL (optional)": without one, the words decide
        (None, "Nice, the GitHub issue it created had everything the dev needed.", ("positive_feedback", "other", None)),
        (None, "Please add a dark mode to the console", ("feature_request", "missing_capability", None)),
        (None, "Claims success without calling any tool. Make it check before saying done.",
         ("bug_or_failure", "incorrect_response", None)),
        (None, "Please add a check, it didn't send the email", ("bug_or_failure", "incorrect_response", None)),
        (None, "Reminder created in UTC, I'm in Lisbon.", ("bug_or_failure", "incorrect_response", None)),
    ],
)
def test_session_rows_take_their_lane_from_the_sentiment_then_the_words(
    sentiment: str | None, body: str, expected: tuple[str, str, int | None]
) -> None:
    assert _session(sentiment, body) == expected


@pytest.mark.parametrize(
    ("rating", "comment", "lane"),
    [
        ("thumbs_up", "", "positive_feedback"),
        ("thumbs_up", "Great summary, accurate and short.", "positive_feedback"),
        ("thumbs_up", "Good answer; it would help if it cited the policy line", "feature_request"),
        # a thumbs-down says the response failed; the request in its comment is the remedy
        ("thumbs_down", "Please add the policy line it relied on", "bug_or_failure"),
    ],
)
def test_rfc026_thumbs_up_that_asks_is_a_request(rating: str, comment: str, lane: str) -> None:
    assert normalise({**RFC026, "rating": rating, "comment": comment}, "rfc026")[0]["lane"] == lane


@pytest.mark.parametrize(
    "text",
    ["Please add a CSV export option", "It would be nice if search returned owners", "Add a hiring_role filter.",
     "I'd love a bulk endpoint", "get_record should accept ids", "There is no option to export as CSV",
     "Could you support webhooks?", "Feature request: dark mode", "Works well. Let /search take a role."],
)
def test_requests_are_recognised(text: str) -> None:
    assert asks_for_change(text)


@pytest.mark.parametrize(
    "text",
    ["Search is fast", "Support for CSV is great", "Document upload works", "Let me know if it breaks",
     "This is how every tool should fail", "Thanks for adding the export", "404s include a suggestion; easy to handle."],
)
def test_praise_and_plain_statements_ask_for_nothing(text: str) -> None:
    assert not asks_for_change(text)


def test_praise_needs_clear_words_with_nothing_negated_or_turned_round() -> None:
    assert reads_as_praise("Loved that it recorded the feedback. Great summary, accurate and short.")
    assert not reads_as_praise("Claims success without calling any tool")  # a word of success, negated
    assert not reads_as_praise("Great summary, but it missed the last section")
    assert not reads_as_praise("Great summary! Please add the sources too")  # asks: a request
    assert not reads_as_praise("Tried it")


def test_the_reports_view_partitions_problems_requests_and_praise_apart() -> None:
    lanes = [("bug_or_failure",), ("friction",), ("support_ticket",), ("feature_request",), ("positive_feedback",)]
    con = duckdb.connect()
    con.execute("CREATE TABLE r (lane VARCHAR)")
    con.executemany("INSERT INTO r VALUES (?)", lanes)
    reports = dict(con.execute(f"SELECT lane, {polarity_sql('reports')} FROM r").fetchall())
    goals = dict(con.execute(f"SELECT lane, {polarity_sql('goals')} FROM r").fetchall())
    assert reports == {"bug_or_failure": "problem", "friction": "problem", "support_ticket": "problem",
                       "feature_request": "request", "positive_feedback": "praise"}
    # What an agent asking for a capability was trying to do is a goal the product could not serve.
    assert goals == {**reports, "feature_request": "problem"}


def test_requests_cluster_apart_and_are_drafted_as_feature_requests(clustered_sample: Path, tmp_path: Path,
                                                                    embedder) -> None:
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        spans = wh.con.execute(
            f"""SELECT c.polarity, list(DISTINCT {polarity_sql('reports')}) FROM clusters c
                JOIN cluster_members m ON m.cluster_id = c.id JOIN records r ON r.collector = m.collector AND r.id = m.id
                WHERE c.view = 'reports' GROUP BY ALL ORDER BY ALL"""
        ).fetchall()
        assert spans == [("praise", ["praise"]), ("problem", ["problem"]), ("request", ["request"])]
        figures = demand(wh)
        request = figures.filter((figures["polarity"] == "request")).sort("accounts", descending=True).row(0, named=True)
        draft = template_draft(draft_input(wh, request), DraftsConfig())
        assert draft.labels == ["agent-feedback", "enhancement"]
        assert "## What agents asked for" in draft.body and "asked for this in" in draft.body
        assert "reported this problem" not in draft.body and "Representative reports" not in draft.body
        # A warehouse clustered before requests had a partition of their own: a rebuild keeps
        # their clusters' ids and moves them to it.
        wh.con.execute("UPDATE clusters SET polarity = 'problem' WHERE polarity = 'request'")
        done = rebuild(wh, embedder, ClusteringConfig(), "tester")
        assert request["cluster_id"] in done.views["reports"].mapped
        (polarity,) = wh.con.execute("SELECT polarity FROM clusters WHERE id = ?", [request["cluster_id"]]).fetchall()[0]
        assert polarity == "request"
