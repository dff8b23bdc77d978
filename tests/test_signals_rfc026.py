"""Signals as RFC-026 §2.4 defines them: an analysis of *the comment*, the reporter's own words.

Which canonical text fields are the comment depends on the dialect: an RFC-026 message's
``goal`` (``context.user_query``) and ``actual`` (``context.ai_response_snippet``) are the rated
exchange, not what the person said about it; an AFS report's ``expected`` and ``actual`` are the
agent's own account of the gap. A record with no comment has no signals (NULL), not neutral ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from feedback_insights.config import Config, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.core import FIELDS
from feedback_insights.ingest import dialects, ingest
from feedback_insights.ingest.dialects import Origin
from feedback_insights.signals import SOURCE, Signals, compute, score_new_records, topics
from feedback_insights.warehouse import Warehouse

from .conftest import write_jsonl
from .test_dialects import AFS_SNAKE, RFC026, SEP_PARAMS, SESSION_ROW

ORIGIN = Origin("test", "2026-11-30T00:00:00Z", digest="abc", service="svc")
NO_SIGNALS = Signals(None, None, None, None, None)


def normalised(obj: dict[str, Any]) -> list[dict[str, Any]]:
    name = dialects.detect(obj)
    assert name is not None and dialects.dialect(name).validate(obj) == []
    return dialects.dialect(name).normalise(obj, ORIGIN)


def rfc026(**changes: Any) -> dict[str, Any]:
    return normalised({**RFC026, **changes})[0]


# --- expectation gap: the pattern in the comment ---------------------------------------------------


def test_a_thumbs_up_with_a_response_snippet_is_no_expectation_gap() -> None:
    up = rfc026(rating="thumbs_up", comment="Spot on, thanks: exactly the risk I was worried about.")
    assert up["actual"]  # the AI's response snippet is there…
    assert compute(up).expectation_gap is False  # …but it is what was rated, not a complaint


def test_a_thumbs_down_is_a_gap_only_when_its_comment_says_so() -> None:
    assert compute(rfc026()).expectation_gap is False  # "It missed that Resource: * allows …"
    said = rfc026(comment="I expected it to flag Resource: * but it said the policy was fine")
    assert compute(said).expectation_gap is True


def test_an_agents_own_expected_and_actual_are_the_gap_the_spec_names() -> None:
    """AFS: "expected / actual / impact: what the agent expected, what it got, what the gap cost"."""
    record = normalised({"tool_name": "list_orders", "summary": "Cursor repeats page 2",
                         "expected": "a new cursor", "actual": "the same cursor"})[0]
    assert compute(record).expectation_gap is True


# --- topics: from the comment, hyphenated terms whole --------------------------------------------------


def test_hyphenated_terms_stay_whole() -> None:
    found = topics("Resource: * allows cross-account AssumeRole")
    assert "cross-account" in found and not {"cross", "account"} & set(found)
    assert "rate-limit" in topics("The rate-limit header is missing on 429s")


def test_rfc026_topics_come_from_the_comment_not_the_rated_exchange() -> None:
    found = set(compute(rfc026()).topics or ())
    assert "cross-account" in found
    assert not {"review", "inline", "policy", "risks", "grants"} & found  # user_query and the snippet


def test_rfc026_tone_and_detail_come_from_the_comment_alone() -> None:
    """A cheerful AI reply ("All set, great!") does not make an angry comment specific or mild."""
    comment = "It said it booked the room. Nothing was booked."
    plain = compute(rfc026(comment=comment, context={"user_query": "", "ai_response_snippet": ""}))
    quoted = compute(rfc026(comment=comment, context={
        "user_query": "Book room 4.12 via calendar_book for Thursday 10:00",
        "ai_response_snippet": "All set, I've booked it for Thursday 10:00. Great!"}))
    assert quoted == plain


# --- no comment, no signals --------------------------------------------------------------------------


@pytest.mark.parametrize("rating", ["thumbs_up", "thumbs_down"])
def test_an_rfc026_message_without_a_comment_has_null_signals(rating: str) -> None:
    assert compute(rfc026(rating=rating, comment="")) == NO_SIGNALS
    assert NO_SIGNALS.as_dict() == {"sentiment": None, "specificity": None, "topics": None,
                                    "expectation_gap": None, "severity_language": None, "source": SOURCE}


def test_a_sep2369_item_without_an_observation_has_null_signals() -> None:
    """Its summary is made from its category, subcategory and tool: a label, not a comment."""
    items = [{k: v for k, v in item.items() if k != "observation"} for item in SEP_PARAMS["items"]]
    for record in normalised({**SEP_PARAMS, "items": items}):
        assert record["summary"]  # "usability parameters (search_files)", for embedding
        assert compute(record) == NO_SIGNALS
    observed = normalised(SEP_PARAMS)[0]
    assert compute(observed).sentiment is not None


def test_comments_of_the_other_dialects_are_scored() -> None:
    for obj in (AFS_SNAKE, SESSION_ROW):
        signals = compute(normalised(obj)[0])
        assert signals.sentiment is not None and signals.severity_language in {"low", "medium", "high"}


def test_a_canonical_record_of_an_unknown_dialect_reads_every_text_field() -> None:
    record: dict[str, Any] = dict.fromkeys(FIELDS) | {"dialect": "zendesk", "goal": "Export contacts",
                                                        "actual": "a 500 on every export"}
    signals = compute(record)
    assert signals.expectation_gap is True and "export" in (signals.topics or ())


# --- the stage: NULL columns, and rows of older heuristics recomputed -----------------------------------


def _config(tmp_path: Path, objects: list[dict[str, Any]]) -> Config:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", objects)
    return Config(warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"), privacy=PrivacyConfig(hmac_key="k" * 32),
                  sources=[FileDropConfig(kind="files", name="drop", path=drop)])


def test_the_stage_stores_null_signals_for_a_record_without_a_comment(tmp_path: Path) -> None:
    silent = {**RFC026, "rating": "thumbs_up", "comment": "", "request_id": "req-2"}
    config = _config(tmp_path, [RFC026, silent])
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        assert score_new_records(wh) == 2
        assert score_new_records(wh) == 0  # a NULL row is a scored row
        rows = wh.con.execute(
            """SELECT r.request_id, s.sentiment, s.specificity, s.topics, s.expectation_gap, s.severity_language, s.source
               FROM records r JOIN record_signals s USING (collector, id) ORDER BY r.request_id"""
        ).fetchall()
    spoken, empty = rows
    assert spoken[1] is not None and "cross-account" in spoken[3] and spoken[4] is False
    assert empty == ("req-2", None, None, None, None, None, SOURCE)


def test_rows_computed_by_older_heuristics_are_computed_again(tmp_path: Path) -> None:
    config = _config(tmp_path, [{**RFC026, "rating": "thumbs_up", "comment": "Great catch, thanks!"}])
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        # What the first heuristics stored: a gap for any response snippet.
        wh.con.execute("""INSERT INTO record_signals SELECT collector, id, 0.5, 0.1, ['policy'], true, 'low',
                          'feedback-insights/heuristics-v1', now() FROM records""")
        assert score_new_records(wh) == 1
        assert score_new_records(wh) == 0
        assert wh.con.execute("SELECT expectation_gap, source FROM record_signals").fetchall() == [(False, SOURCE)]
