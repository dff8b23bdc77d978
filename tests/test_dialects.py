"""The other dialects: detection, lenient AFS, SEP-2369 mapping, in-session rows, RFC-026."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from feedback_insights.config import Config, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.core import DIALECTS, FIELDS, CanonicalRecord, Problem
from feedback_insights.ingest import RawItem, dialects, ingest, process
from feedback_insights.ingest.dialects import Origin
from feedback_insights.privacy import Pseudonymiser
from feedback_insights.warehouse import Warehouse

from .conftest import REPO, write_jsonl

CANONICAL = json.loads((REPO / "schemas" / "canonical_record.schema.json").read_text())
ORIGIN = Origin("test", "2026-11-30T00:00:00Z", digest="abc", service="default-svc")


def normalise(obj: Any, choice: str = "auto") -> list[dict[str, Any]]:
    name = dialects.detect(obj, choice)
    assert name is not None, obj
    assert dialects.dialect(name).validate(obj) == []
    records = dialects.dialect(name).normalise(obj, ORIGIN)
    for record in records:
        jsonschema.Draft202012Validator(CANONICAL, format_checker=jsonschema.FormatChecker()).validate(record)
        assert list(record) == list(FIELDS)
    return records


AFS_SNAKE = {
    "tool_name": "list_orders",
    "summary": "Cursor repeats page 2",
    "detail": "next_cursor on page 2 equals the one on page 1",
    "category": "pagination_or_truncation",
    "outcome": "partial_success",
    "satisfaction_score": 2,
    "severity": "high",
    "suggested_fix": "Make next_cursor opaque and monotonic",
    "expected": "a new cursor",
    "actual": "the same cursor",
    "impact": "40 duplicate calls",
    "attempted_calls": ["GET /v2/orders", "GET /v2/orders?cursor=abc"],
    "source": "runtime_observed",
    "metadata": {"heuristic": "repeated_call", "runtime": "claude-code"},
}


def test_afs_snake_and_camel_case_normalise_identically() -> None:
    camel = {
        {"tool_name": "toolName", "satisfaction_score": "satisfactionScore", "suggested_fix": "suggestedFix",
         "attempted_calls": "attemptedCalls"}.get(k, k): v
        for k, v in AFS_SNAKE.items()
    }
    snake_record, camel_record = normalise(AFS_SNAKE)[0], normalise(camel)[0]
    for field in FIELDS:
        if field != "original":
            assert snake_record[field] == camel_record[field], field
    assert snake_record["lane"] == "friction"  # derived: pagination + partial success
    assert snake_record["rating"] == 2 and snake_record["severity"] == "high"
    assert snake_record["evidence"] == {"attempted_calls": AFS_SNAKE["attempted_calls"], "impact": "40 duplicate calls"}
    assert snake_record["source"] == "runtime_observed"


@pytest.mark.parametrize(
    ("field", "sent", "canonical_field", "expected"),
    [
        ("category", "Feature Request", "category", "missing_capability"),
        ("category", "feature-request", "category", "missing_capability"),
        ("category", "docs", "category", "docs_mismatch"),
        ("category", "timeout", "category", "rate_limit_or_timeout"),
        ("category", "pagination", "category", "pagination_or_truncation"),
        ("category", "Rate Limit", "category", "rate_limit_or_timeout"),
        ("category", "auth", "category", "authentication_problem"),
        ("category", "CONFUSING SCHEMA", "category", "confusing_schema"),
        ("feedback_type", "Bug", "lane", "bug_or_failure"),
        ("feedback_type", "feature request", "lane", "feature_request"),
        ("feedback_type", "docs", "lane", "docs_feedback"),
        ("severity", "CRITICAL", "severity", "blocking"),
        ("severity", "High", "severity", "high"),
        ("outcome", "Failed", "outcome", "failure"),
        ("outcome", "partial", "outcome", "partial_success"),
    ],
)
def test_afs_near_miss_values_are_normalised_not_rejected(field: str, sent: str, canonical_field: str, expected: str) -> None:
    body = {"tool_name": "search", "summary": "s", field: sent}
    assert normalise(body)[0][canonical_field] == expected


def test_afs_unrecognisable_values_are_rejected_with_the_field_path_as_sent() -> None:
    body = {"toolName": "search", "summary": "s", "category": "vibes", "satisfactionScore": 9, "feedbackType": "??"}
    paths = {p.path for p in dialects.afs.validate(body)}
    assert paths == {"category", "satisfactionScore", "feedbackType"}
    assert {p.path for p in dialects.afs.validate({"toolName": "x"})} == {"summary"}


@pytest.mark.parametrize(
    ("body", "lane"),
    [
        ({"category": "missing_capability"}, "feature_request"),
        ({"category": "docs_mismatch", "outcome": "success"}, "docs_feedback"),
        ({"category": "unhelpful_error", "outcome": "failure"}, "bug_or_failure"),
        ({"category": "unhelpful_error", "outcome": "success"}, "friction"),
        ({"outcome": "success", "satisfaction_score": 5}, "positive_feedback"),
        ({"outcome": "success", "satisfaction_score": 2}, "friction"),
        ({"category": "wrong_tool_selected"}, "workflow_feedback"),
    ],
)
def test_afs_lane_is_derived_when_omitted(body: dict[str, Any], lane: str) -> None:
    assert normalise({"tool_name": "t", "summary": "s", **body})[0]["lane"] == lane


@pytest.mark.parametrize(
    ("sent", "severity"),
    [(5, "blocking"), (4, "high"), (3, "medium"), (2, "low"), (1, "low"), ("4", "high"), (" 5 ", "blocking"),
     (4.0, "high")],
)
def test_afs_integer_severity_maps_by_the_sep2369_table(sent: Any, severity: str) -> None:
    """The spec's one integer scale (5 → blocking, 4 → high, 3 → medium, 1–2 → low), wherever it is sent."""
    assert normalise({"tool_name": "t", "summary": "s", "severity": sent})[0]["severity"] == severity


@pytest.mark.parametrize(("sent", "rating"), [("4", 4), (" 5 ", 5), ("2.0", 2), (3, 3), (1.0, 1)])
def test_afs_numeric_string_scores_are_read_as_numbers(sent: Any, rating: int) -> None:
    assert normalise({"toolName": "t", "summary": "s", "satisfactionScore": sent})[0]["rating"] == rating


@pytest.mark.parametrize(
    ("field", "sent"),
    [("severity", 7), ("severity", 0), ("severity", True), ("severity", "6"), ("satisfaction_score", "9"),
     ("satisfaction_score", "four"), ("satisfaction_score", "4.5"), ("satisfaction_score", 0)],
)
def test_afs_numbers_out_of_the_scale_are_rejected(field: str, sent: Any) -> None:
    assert {p.path for p in dialects.afs.validate({"tool_name": "t", "summary": "s", field: sent})} == {field}


@pytest.mark.parametrize(
    ("body", "lane"),
    [
        # No score: the words decide. A success that the agent describes as a struggle is friction.
        ({"outcome": "success", "summary": "Export returned 500 twice; had to retry before it worked"}, "friction"),
        ({"outcome": "success", "summary": "Search is fast and the filters just work"}, "positive_feedback"),
        ({"outcome": "success", "summary": "Listed 40 projects in one call"}, "positive_feedback"),
        # A score is the agent's own verdict and wins over the wording; numeric strings count.
        ({"outcome": "success", "satisfaction_score": "5", "summary": "Field-level conflict message"}, "positive_feedback"),
        ({"outcome": "success", "satisfaction_score": "2", "summary": "Search is fast"}, "friction"),
        ({"outcome": "failure", "summary": "Search is fast and reliable"}, "bug_or_failure"),
    ],
)
def test_afs_lane_derivation_reads_the_score_then_the_words(body: dict[str, Any], lane: str) -> None:
    assert normalise({"tool_name": "t", **body})[0]["lane"] == lane


def test_afs_in_the_collector_envelope_takes_identity_from_it() -> None:
    record = normalise({"id": "fb_9", "received_at": "2026-10-01T09:00:00Z", "service": "orbit-mcp",
                        "account": "acct_1", "source": "mcp", "feedback": AFS_SNAKE})[0]
    assert (record["id"], record["service"], record["account"]) == ("fb_9", "orbit-mcp", "acct_1")
    assert record["context"] == {"channel": "mcp"}
    bad = {"id": "fb_9", "received_at": "yesterday", "feedback": {"toolName": "t"}}
    assert {p.path for p in dialects.afs.validate(bad)} == {"received_at", "feedback.summary"}


SEP_PARAMS = {
    "feedbackVersion": "2026-03-08",
    "generatedAt": "2026-11-02T10:00:00Z",
    "cadence": "session",
    "onDemand": True,
    "items": [
        {"category": "usability", "toolName": "search_files", "severity": 4, "subcategory": "parameters",
         "confusedWith": "find_files", "confusedWithExternal": False,
         "observation": "Parameters serve similar purposes but expect different formats."},
        {"category": "efficiency", "toolName": "get_record", "severity": 2, "subcategory": "needs_batch_mode",
         "sessionMetrics": {"totalCalls": 47, "failedCalls": 1}},
        {"category": "interoperability", "toolNames": ["create_item", "validate_item"], "severity": 5},
    ],
    "rollupMetrics": {"totalToolCalls": 156, "overallSuccessRate": 0.82},
    "service": "orbit-mcp",
    "account": "acct_3",
}


@pytest.mark.parametrize("enveloped", [False, True])
def test_sep2369_items_map_by_the_spec_table(enveloped: bool) -> None:
    params = dict(SEP_PARAMS)
    obj = {"jsonrpc": "2.0", "id": 7, "method": "feedback/submit", "params": params} if enveloped else params
    records = normalise(obj, "afs")
    assert [r["dialect"] for r in records] == ["sep2369"] * 3
    assert [r["category"] for r in records] == ["confusing_schema", "pagination_or_truncation", "other"]
    assert [r["severity"] for r in records] == ["high", "low", "blocking"]
    assert [r["tool"] for r in records] == ["search_files", "get_record", "create_item"]
    assert len({r["id"] for r in records}) == 3
    first, second, third = records
    assert first["summary"].startswith("Parameters serve")
    assert first["metadata"]["sep2369"] == {
        "feedbackVersion": "2026-03-08", "generatedAt": "2026-11-02T10:00:00Z", "cadence": "session",
        "onDemand": True, "rollupMetrics": SEP_PARAMS["rollupMetrics"], "subcategory": "parameters",
        "confusedWith": "find_files", "confusedWithExternal": False, "category": "usability",
        **({"jsonrpc_id": 7} if enveloped else {}),
    }
    assert second["evidence"] == {"session_metrics": {"totalCalls": 47, "failedCalls": 1}}
    assert third["metadata"]["sep2369"]["toolNames"] == ["create_item", "validate_item"]
    assert all(r["service"] == "orbit-mcp" and r["account"] == "acct_3" for r in records)
    assert all(r["received_at"] == "2026-11-02T10:00:00Z" for r in records)


@pytest.mark.parametrize(
    ("sent", "category"),
    [("Usability", "confusing_schema"), ("capability-gap", "missing_capability"), ("Capability Gap", "missing_capability"),
     ("DOCUMENTATION", "docs_mismatch"), ("reliability ", "unhelpful_error"), ("timeout", "rate_limit_or_timeout")],
)
def test_sep2369_near_miss_categories_are_normalised_not_rejected(sent: str, category: str) -> None:
    item = {"category": sent, "toolName": "search_files", "observation": "o"}
    record = normalise({"items": [item], "service": "orbit-mcp"}, "afs")[0]
    assert record["category"] == category
    assert record["metadata"]["sep2369"]["category"] == sent  # kept as sent


@pytest.mark.parametrize(("sent", "severity"), [("high", "high"), ("4", "high"), ("CRITICAL", "blocking"), (5, "blocking")])
def test_sep2369_severity_names_and_numeric_strings_are_normalised(sent: Any, severity: str) -> None:
    item = {"category": "usability", "severity": sent, "observation": "o"}
    assert normalise({"items": [item]}, "afs")[0]["severity"] == severity


def test_sep2369_errors_name_the_item() -> None:
    bad = {"jsonrpc": "2.0", "id": 1, "method": "feedback/other",
           "params": {"items": [{"category": "usability", "severity": 7}, {"category": "vibes"}]}}
    paths = {p.path for p in dialects.sep2369.validate(bad)}
    assert paths == {"method", "params.items.0.severity", "params.items.1.category"}


SESSION_ROW = {
    "id": "6f1c7d2e-0000-4000-8000-000000000001",
    "ts": 1786413479223,
    "user_id": "usr_5fab",
    "instance_id": "5fab318d",
    "author": "user",
    "surface": "chat",
    "sentiment": "bad",
    "body": "You said you listed all agents but only 3 of 6 came back",
    "trace_id": "d4bd169f-7d1e-45cb-921e-2828d85d3b64",
    "message_id": "06344814-6e21-40c0-a923-2003608d6511",
    "target_role": "assistant",
    "target_text": "Here are your agents: A, B, C.",
    "target_at": "2026-08-11T01:57:59.126Z",
    "prompt_text": "how many agents do you have in total? Give me their names.",
    "context": json.dumps({"agentSlug": "coder-lead", "model": "claude-opus-5", "engine": "loop",
                           "audioKey": "r2://audio/abc.webm", "dictation": "how many ages does Kevin total"}),
    "status": "open",
}


def test_session_row_keeps_pointers_snapshots_and_voice_context() -> None:
    record = normalise(SESSION_ROW)[0]
    assert record["dialect"] == "session" and record["service"] == "default-svc"
    assert record["received_at"] == "2026-08-11T01:57:59.223Z"
    assert (record["trace_id"], record["message_id"]) == (SESSION_ROW["trace_id"], SESSION_ROW["message_id"])
    assert record["evidence"]["target_text"] == "Here are your agents: A, B, C."
    assert record["evidence"]["prompt_text"].startswith("how many agents")
    assert record["context"]["audioKey"] == "r2://audio/abc.webm"
    assert record["context"]["dictation"] == "how many ages does Kevin total"
    assert record["status"] == "open" and record["context"]["surface"] == "chat"
    assert record["agent"] == {"name": "coder-lead", "model": "claude-opus-5", "framework": "loop"}
    assert (record["lane"], record["category"], record["rating"], record["source"]) == (
        "bug_or_failure", "incorrect_response", 1, "human_authored")


def test_session_row_problems() -> None:
    row = {**SESSION_ROW, "body": "", "surface": "fax", "context": "{not json"}
    paths = {p.path for p in dialects.session.validate(row)}
    assert paths == {"body", "surface", "context"}


RFC026 = {
    "protocol_version": "2.0",
    "message_type": "FEEDBACK",
    "app_id": "identity-service",
    "request_id": "req-1718500000000",
    "session_id": "sess-abc456",
    "pseudonym_id": "usr-a7f3b2c1e9d0",
    "timestamp": "2026-06-17T09:30:00Z",
    "rating": "thumbs_down",
    "comment": "It missed that Resource: * allows cross-account AssumeRole",
    "nlp": {"sentiment": -0.6, "specificity": 0.85, "topics": ["iam", "cross-account"],
            "expectation_gap": True, "severity_language": "medium"},
    "context": {"user_query": "Review this inline policy for cross-account risks",
                "ai_response_snippet": "The policy grants sts:AssumeRole with Resource: * which..."},
    "relationship": {"type": "FEEDBACK_ON", "parent_id": "req-1718500000000", "parent_ref": "s3://evidence-bucket/x.json.gz"},
}


def test_rfc026_maps_rating_and_keeps_the_nlp_object_as_provided() -> None:
    record = normalise(RFC026)[0]
    assert (record["service"], record["account"], record["rating"], record["lane"]) == (
        "identity-service", "usr-a7f3b2c1e9d0", 1, "bug_or_failure")
    assert record["metadata"] == {"nlp": RFC026["nlp"]}
    assert record["goal"] == RFC026["context"]["user_query"]
    assert record["request_id"] == "req-1718500000000"
    up = normalise({**RFC026, "rating": "thumbs_up", "comment": ""})[0]
    assert (up["lane"], up["rating"], up["summary"]) == ("positive_feedback", 5, None)


def test_rfc026_problems() -> None:
    bad = {k: v for k, v in RFC026.items() if k != "pseudonym_id"} | {"rating": "meh"}
    assert {p.path for p in dialects.rfc026.validate(bad)} == {"pseudonym_id", "rating"}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"type": "bug", "goal": "g", "message": "m"}, "afp"),
        ({"id": "x", "received_at": "2026-01-01T00:00:00Z", "feedback": {"type": "bug", "goal": "g", "message": "m"}}, "afp"),
        (AFS_SNAKE, "afs"),
        ({"feedback": {"toolName": "t", "summary": "s"}}, "afs"),
        (SEP_PARAMS, "sep2369"),
        ({"jsonrpc": "2.0", "method": "feedback/submit", "params": SEP_PARAMS}, "sep2369"),
        (SESSION_ROW, "session"),
        (RFC026, "rfc026"),
        ({"hello": "world"}, None),
        ([1, 2], None),
    ],
)
def test_auto_detection(obj: Any, expected: str | None) -> None:
    assert dialects.detect(obj) == expected


def test_an_explicit_dialect_overrides_detection_and_explains_the_mismatch() -> None:
    assert dialects.detect(RFC026, "afp") == "afp"
    checked = process([RawItem(RFC026, "line 1")], collector="c", source_uri="u", received_at="2026-01-01T00:00:00Z",
                      choice="afp")
    assert not checked.records
    assert {p.path for p in checked.quarantined[0].problems} >= {"goal", "message", "type", "app_id"}


# -- accounts, whatever dialect made the record -------------------------------------------------


def canonical(**fields: Any) -> CanonicalRecord:
    """A canonical record with every field, ``fields`` over neutral defaults: what a plugin
    dialect's ``normalise`` returns."""
    record = dict.fromkeys(FIELDS) | {"dialect": "plugin", "source": "human_authored", "lane": "bug_or_failure",
                                      "category": "other"}
    return record | fields  # type: ignore[return-value]


class Crm:
    """A CRM's case export, whose account is a field no built-in dialect has:
    ``{"case": n, "who": {"customer_ref": …}, "assignee": …, "watchers": […], "subject": …}``."""

    ORDER = 5
    ACCOUNT_FIELDS = ("who.customer_ref",)
    IDENTITY_FIELDS = ("assignee", "watchers.*")

    @staticmethod
    def looks_like(obj: Any) -> bool:
        return isinstance(obj, dict) and "case" in obj

    @staticmethod
    def validate(obj: Any, max_bytes: int = 0, size: int | None = None) -> list[Problem]:
        return [] if isinstance(obj.get("subject"), str) else [Problem("subject", "must be a string")]

    @staticmethod
    def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
        return [canonical(id=f"case-{obj['case']}", dialect="crm", collector=origin.collector, service="crm-desk",
                          account=obj["who"]["customer_ref"], received_at=origin.received_at, summary=obj["subject"],
                          metadata=obj.get("metadata"), original=obj)]


@pytest.fixture
def crm_dialect() -> Iterator[None]:
    DIALECTS.register("crm", Crm)
    yield
    DIALECTS.unregister("crm")


PSEUDONYMS = Pseudonymiser("test-key-xxxxxxxxxxxxxxxxxxxxxxx")
#: Who filed, was assigned, watched and reported the CRM's cases: none may be stored as it is.
CRM_PEOPLE = ("cust-8841-q", "agent.smith.77", "watcher-zed-3", "reporter-jd-55", "cust-9912-q", "owner-kb-12")


def test_a_plugin_dialect_s_accounts_reach_no_table_and_no_byte_of_the_warehouse(crm_dialect: None, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "cases.jsonl", [
        {"case": 1, "who": {"customer_ref": "cust-8841-q"}, "assignee": "agent.smith.77", "watchers": ["watcher-zed-3"],
         "subject": "Export stops at 10,000 rows", "metadata": {"reporter": "reporter-jd-55", "tier": "gold"}},
        {"case": 2, "who": {"customer_ref": "cust-9912-q"}, "subject": 3, "metadata": {"ownerId": "owner-kb-12"}},
    ])
    config = Config(privacy=PrivacyConfig(hmac_key="test-key-xxxxxxxxxxxxxxxxxxxxxxx"), warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
                    sources=[FileDropConfig(kind="files", name="crm", path=drop)])
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        (stored,) = wh.con.execute("SELECT account, original, metadata FROM records").fetchall()
        tables = [str(row) for table in ("records", "quarantine") for row in wh.con.execute(f"SELECT * FROM {table}").fetchall()]
    assert (summary.counts.new, summary.counts.quarantined) == (1, 1)
    account, original, metadata = stored[0], orjson.loads(stored[1]), orjson.loads(stored[2])
    assert account == PSEUDONYMS("cust-8841-q") == original["who"]["customer_ref"]  # one pseudonym, both places
    assert original["assignee"] == PSEUDONYMS("agent.smith.77") and original["watchers"] == [PSEUDONYMS("watcher-zed-3")]
    assert metadata == {"reporter": PSEUDONYMS("reporter-jd-55"), "tier": "gold"} == original["metadata"]
    kept = "\n".join(tables) + (tmp_path / "wh.duckdb").read_bytes().decode("latin-1")
    for person in CRM_PEOPLE:
        assert person not in kept, person
    assert PSEUDONYMS("cust-9912-q") in kept  # the quarantined case keeps its account, pseudonymised


def test_a_raw_account_under_a_key_that_names_a_person_is_pseudonymised_in_metadata_and_original() -> None:
    people = {"reporter": "jane-r", "customer_id": "c-1", "accountName": "Acme Ltd", "user": "bob-7", "ownerId": "o-9",
              "reporterEmail": "jane@example.org"}
    kept = {"user_agent": "curl/8.5", "user_query": "why", "author": "agent", "owner_count": 3}
    body = {"tool_name": "export", "summary": "Export stops", "metadata": {**people, **kept}}
    report = {"id": "fb_1", "received_at": "2026-11-01T00:00:00Z", "service": "svc", "account": "acct-raw-1", "feedback": body}
    invalid = {**report, "id": "fb_2", "feedback": {**body, "category": "vibes"}}
    done = process([RawItem(report, "line 1"), RawItem(invalid, "line 2")], collector="c", source_uri="u",
                   received_at="2026-11-30T00:00:00Z", pseudonymise=PSEUDONYMS)
    (record,) = done.records
    expected = {key: PSEUDONYMS(value) for key, value in people.items()} | kept
    assert record["metadata"] == expected == record["original"]["feedback"]["metadata"]
    assert record["account"] == PSEUDONYMS("acct-raw-1")
    (entry,) = done.quarantined
    assert not any(value in entry.raw for value in (*people.values(), "acct-raw-1"))


def test_the_canonical_account_is_pseudonymised_whichever_field_a_dialect_read_it_from() -> None:
    class Chat:
        @staticmethod
        def looks_like(obj: Any) -> bool:
            return isinstance(obj, dict) and "chat" in obj

        @staticmethod
        def validate(obj: Any, max_bytes: int = 0, size: int | None = None) -> list[Problem]:
            return []

        @staticmethod
        def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
            return [canonical(id=str(obj["chat"]), collector=origin.collector, service="chat", account=obj["handle"],
                              received_at=origin.received_at, summary="s", original=obj)]

    DIALECTS.register("chat", Chat)
    try:
        done = process([RawItem({"chat": 1, "handle": "h-42"}, "row 0")], collector="c", source_uri="u",
                       received_at="2026-11-30T00:00:00Z", pseudonymise=PSEUDONYMS)
    finally:
        DIALECTS.unregister("chat")
    assert [r["account"] for r in done.records] == [PSEUDONYMS("h-42")]
