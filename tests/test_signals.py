"""RFC-026 §2.4 heuristic signals: hand-labelled agent feedback, canonical records, invariants."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from feedback_insights.core import FIELDS, TEXT_FIELDS
from feedback_insights.signals import (
    DOMAIN_LEXICON,
    SOURCE,
    TONE_FIELDS,
    Signals,
    compute,
    expectation_gap,
    sentiment,
    severity_language,
    specificity,
    topics,
)

PLAIN_VADER = SentimentIntensityAnalyzer()


def plain(text: str) -> float:
    return PLAIN_VADER.polarity_scores(text)["compound"]


def record(**fields: Any) -> dict[str, Any]:
    """A canonical record with every field None except the ones given."""
    base: dict[str, Any] = dict.fromkeys(FIELDS)
    base.update(id="fb_1", dialect="afs", collector="test", lane="bug_or_failure", category="other")
    return base | fields


# --- sentiment ------------------------------------------------------------------------------------

FAILURE_REPORTS = [
    "GET /v2/orders returned 500 after 30s.",
    "The list was silently truncated at 50 items.",
    "Timeout after 30s on every export.",
    "The filter parameter is undocumented.",
    "Had to page through 40 calls to find one record.",
    "Request timed out twice, then returned 503.",
    "The export endpoint doesn't work when limit is set.",
    "Got a 404 Not Found for an id that list_records returned a second earlier.",
    "Search is slow and flaky under load.",
    "Retried 5 times; throttled after 50 calls.",
    "The tool hallucinated a project id.",
]

PRAISE = [
    "Pagination is fast and reliable.",
    "The new endpoint just works.",
    "Cursor pagination works as expected.",
    "Search is fast, even with four filters.",
    "Export is reliable and the polling flow is straightforward.",
    "Worked on the first try.",
    "Spot on: validate_item named the exact field.",
    "The schema is intuitive and the docs are well-documented.",
]


@pytest.mark.parametrize("text", FAILURE_REPORTS)
def test_failure_reports_are_negative_where_plain_vader_is_neutral(text: str) -> None:
    assert abs(plain(text)) < 0.05
    assert sentiment(text) < -0.2


@pytest.mark.parametrize("text", PRAISE)
def test_praise_is_positive_where_plain_vader_is_neutral(text: str) -> None:
    assert abs(plain(text)) < 0.05
    assert sentiment(text) > 0.2


@pytest.mark.parametrize(
    ("text", "sign"),
    [
        ("The error message was not helpful.", -1),
        ("The docs are not reliable.", -1),
        ("It does not work correctly.", -1),
        ("Failed with no error message.", -1),
        ("No timeout this time.", 1),
        ("Ran with no errors.", 1),
        ("The export isn't slow anymore.", 1),
    ],
)
def test_negation_flips_domain_words(text: str, sign: int) -> None:
    assert sentiment(text) * sign > 0.15


def test_no_way_to_is_stronger_than_plain_no() -> None:
    text = "No way to filter companies by hiring role."
    assert sentiment(text) < plain(text) < 0


def test_an_error_message_is_a_feature_not_a_failure() -> None:
    praise = "Clear error messages, easy to fix."
    assert plain(praise) < 0.5 < sentiment(praise)
    assert sentiment("The export returned an error.") < -0.2


def test_payloads_carry_no_tone() -> None:
    text = 'The deploy returned { "status": "ok", "success": true }'
    assert plain(text) > 0.5
    assert sentiment(text) == 0.0


def test_counts_are_not_http_errors() -> None:
    assert sentiment("It returned 500 rows.") == 0.0
    assert sentiment("It returned 500.") < 0


@pytest.mark.parametrize(
    "text",
    [
        "I love this phone, but the battery is terrible.",
        "What a wonderful, moving film.",
        "Ugh. I hate hate hate getting blood drawn.",
        "The plot was good, but the characters are uncompelling.",
    ],
)
def test_general_english_keeps_vaders_score(text: str) -> None:
    assert sentiment(text) == plain(text)


def test_the_domain_lexicon_only_adds_words() -> None:
    assert not set(DOMAIN_LEXICON) & set(PLAIN_VADER.lexicon)
    assert all(-4.0 <= value <= 4.0 for value in DOMAIN_LEXICON.values())


# --- specificity ----------------------------------------------------------------------------------

VAGUE = [
    "it didn't work",
    "this is bad",
    "The tool is confusing and I could not finish the task.",
    "Search results were not what I wanted.",
    "Something went wrong again.",
    "Please make the docs better.",
    "The tool was confusing. " * 30,
    "",
]

DETAILED = [
    'GET /v2/orders?cursor=abc returned 500 {"error":"internal"} after 30s; next_cursor repeats on page 2',
    'POST /v1/contacts/export with {"limit": 500} returns 400 Bad Request; request_id req_8f2c1a',
    "list_projects caps at 50 items: page_size=100 still returns 50 and has_more=false.",
    "Docs say sha1(body); deliveries send X-Acme-Signature: v1=sha256(t.body). Event evt_2475976601ff.",
    "trace 7e5d9975-a055-45ad-9b7c-d7c4cf5d46b2: get_record(id) took 6.8s against a 5s timeout.",
    "search_files ignores `glob`; `pattern=*.yaml` returns README.md (line 12).",
]


@pytest.mark.parametrize("text", VAGUE)
def test_vague_text_is_not_specific(text: str) -> None:
    assert specificity(text) < 0.2


@pytest.mark.parametrize("text", DETAILED)
def test_detailed_reports_are_specific(text: str) -> None:
    assert specificity(text) > 0.7


def test_every_detailed_report_beats_every_vague_one() -> None:
    assert min(map(specificity, DETAILED)) > max(map(specificity, VAGUE))


def test_specificity_grows_with_detail() -> None:
    steps = [
        "Export fails",
        "Export fails with HTTP 400",
        'POST /contacts/export fails with HTTP 400: {"error":"bad_request"}, field `columns`',
    ]
    scores = [specificity(text) for text in steps]
    assert scores == sorted(scores)
    assert len(set(scores)) == 3


def test_one_detail_in_a_long_text_counts_less_than_in_a_short_one() -> None:
    short = "Export fails with HTTP 400."
    long = short + " The tool was confusing and the whole session went badly." * 10
    assert specificity(long) < specificity(short)


def test_specificity_saturates_below_one() -> None:
    text = " ".join(f"GET /v2/items/{n} returned 500 for req_{n:06x}" for n in range(200))
    assert 0.99 < specificity(text) <= 1.0


# --- topics ---------------------------------------------------------------------------------------


def test_topics_rank_names_and_path_segments_first_and_drop_noise() -> None:
    found = topics("GET /v2/orders?cursor=abc returned 500; next_cursor repeats on page 2")
    assert found[:3] == ["next_cursor", "orders", "cursor"]
    assert not {"get", "v2", "abc", "500", "returned"} & set(found)


def test_topics_put_the_tool_name_first() -> None:
    found = topics(
        "The glob param is ignored; search_files returns README.md for every search_files call"
    )
    assert found[0] == "search_files"
    assert "glob" in found


def test_generic_feedback_words_are_not_topics() -> None:
    assert topics(
        "The agent got an error from the API tool: please check the request and response"
    ) == ["check"]


def test_ids_and_versions_are_not_topics() -> None:
    assert topics("request req_8f2c1a session sess_42 trace 7e5d9975 on v2") == ["session", "trace"]


def test_scrubbed_placeholders_are_not_topics() -> None:
    found = topics("Send the export to [REDACTED:email:1] with key [REDACTED:api_key:2]")
    assert found == ["send", "export", "key"]


def test_verdicts_are_not_topics_but_problem_areas_are() -> None:
    assert topics("Great search, fast filters") == ["search", "filters"]
    assert topics("Security hole: the crash log leaks keys") == [
        "security",
        "hole",
        "crash",
        "log",
        "keys",
    ]


def test_plurals_merge_into_the_singular_and_possessives_fold() -> None:
    assert topics("Webhook signature fails; webhooks docs show the old signature")[:2] == [
        "webhook",
        "signature",
    ]
    assert topics("The user's export job's status") == ["export", "job", "status"]


def test_topics_are_lowercase_deterministic_and_limited() -> None:
    text = "OpenAPI spec lists founded_year as an integer; alpha beta gamma delta epsilon"
    assert topics(text) == ["openapi", "founded_year", "spec", "lists", "integer", "alpha"]
    assert topics(text, limit=2) == ["openapi", "founded_year"]
    assert topics(text, limit=0) == []


# --- expectation gap ------------------------------------------------------------------------------

GAPS = [
    "Expected 25 records but got 24.",
    "expected a cursor, got null",
    "I expected the export to include archived contacts.",
    "We were expecting a 201 and received 200 with an empty body.",
    "The search should return companies but returns an empty list.",
    "Returned 200 instead of 404 for a missing id.",
    "It renamed the file instead of deleting it.",
    "create_item was supposed to validate the payload first.",
    "The endpoint returned XML rather than JSON.",
    "Got an empty list when I asked for all projects.",
    "Slower than expected: 4s per call.",
    "Docs say the header is X-Acme-Signature but deliveries send Acme-Signature.",
    "Expected: 50 items. Actual: 24.",
    "The error should have named the field.",
    "Not what I expected: the cursor never advances.",
]

NO_GAPS = [
    "Works as expected.",
    "Returned exactly what I expected.",
    "As I expected, the cursor works.",
    "The export returned 500.",
    "Please add a hiring_role filter.",
    "Pagination is fast and reliable.",
    "validate_item errors point at the exact field path with the expected format.",
    "It didn't work.",
    "The docs say to use a cursor.",
]


@pytest.mark.parametrize("text", GAPS)
def test_expectation_gap_phrasings(text: str) -> None:
    assert expectation_gap(text) is True


@pytest.mark.parametrize("text", NO_GAPS)
def test_no_expectation_gap(text: str) -> None:
    assert expectation_gap(text) is False


def test_expected_or_actual_field_is_a_gap_when_not_blank() -> None:
    assert expectation_gap("", expected="One call returning all open roles")
    assert expectation_gap("", actual='{"status":"ok"} and no rollout')
    assert not expectation_gap("", expected="  ", actual="")


# --- severity language ----------------------------------------------------------------------------

SEVERITY = {
    "high": [
        "Production is down: every request to /v2/orders returns 503.",
        "Blocking: cannot create any item.",
        "Data loss: the sync deleted 300 contacts.",
        "Security issue: the API key is echoed in error responses.",
        "Urgent, all requests fail since 09:00.",
        "This is completely broken!!",
        "The endpoint is totally useless and wastes hours.",
        "Unable to authenticate with a valid token.",
        "Terrible, awful, broken, useless tool.",
        "Why does this keep failing?!?! Again!!!",
    ],
    "medium": [
        "The export returned 400 with no details.",
        "Cursor pagination repeats page 2.",
        "Search ignores the glob parameter.",
        "It took 8 calls to find the right record.",
        "The docs describe the wrong header name.",
        "Timeout after 30s on the export.",
    ],
    "low": [
        "Minor: the description has a typo.",
        "Would be nice to have a batch get_records.",
        "Slightly confusing parameter name, not blocking.",
        "Cosmetic: timestamps use two formats.",
        "Small nit: the field is called ownerId in one place.",
        "Not urgent, but the limit could be documented.",
        "Great docs, thanks!",
        "Absolutely love the new search, works great!!",
    ],
}


@pytest.mark.parametrize(
    ("text", "level"), [(text, level) for level, texts in SEVERITY.items() for text in texts]
)
def test_severity_language(text: str, level: str) -> None:
    assert severity_language(text) == level


# --- compute() on canonical records ---------------------------------------------------------------


def test_compute_a_bug_report_with_expected_and_actual() -> None:
    signals = compute(
        record(
            summary="Cursor repeats page 2",
            detail="next_cursor on page 2 equals the one on page 1; had to stop after 40 calls",
            goal="Sync every order into the warehouse",
            tool="list_orders",
            expected="A new cursor on every page",
            actual="The same 25 orders again",
            suggestion="Encode the last sort key in the cursor",
            rating=2,
        )
    )
    assert signals.expectation_gap
    assert signals.sentiment < -0.2
    assert signals.specificity > 0.3
    assert {"next_cursor", "cursor", "page", "order"} <= set(signals.topics)
    assert signals.severity_language == "medium"


def test_compute_praise() -> None:
    signals = compute(
        record(
            lane="positive_feedback",
            summary="validate_item says exactly what to fix",
            detail="Clear, actionable messages with the field path (items[2].owner_id). Fixed it first try.",
            rating=5,
        )
    )
    assert signals.sentiment > 0.2
    assert signals.severity_language == "low"
    assert not signals.expectation_gap
    assert signals.topics[:2] == ("validate_item", "owner_id")


def test_goal_expected_and_actual_add_topics_and_detail_but_no_tone() -> None:
    summary = "The assistant said it booked the room; nothing was booked."
    signals = compute(
        record(
            summary=summary,
            goal="Book a great, quiet room via calendar_book for Thursday",
            actual="All set, I've booked it. Great!",
        )
    )
    assert signals.sentiment == sentiment(summary)
    assert signals.severity_language == severity_language(summary)
    assert "calendar_book" in signals.topics
    assert signals.specificity > specificity(summary)
    assert signals.expectation_gap


def test_rating_and_lane_do_not_move_the_signals() -> None:
    text = {"summary": "Search ignores the glob parameter.", "detail": "Tried 4 combinations."}
    angry = compute(record(**text, lane="bug_or_failure", rating=1))
    happy = compute(record(**text, lane="positive_feedback", rating=5))
    assert angry == happy


def test_compute_an_empty_record() -> None:
    """No comment, no signals: None, not a neutral 0.0 / "medium" that reads as a measurement."""
    assert compute(record()) == Signals(None, None, None, None, None)
    assert compute(record(summary="   ", detail="", goal=None)) == Signals(None, None, None, None, None)


def test_a_comment_with_no_words_in_the_reporters_voice_has_no_tone() -> None:
    signals = compute(record(goal="Export contacts", expected="All 1,200 rows"))
    assert (signals.sentiment, signals.severity_language) == (None, None)
    assert signals.expectation_gap is True and signals.topics


def test_as_dict_names_its_source_and_is_json() -> None:
    signals = compute(record(summary="GET /v2/orders returned 500", expected="200"))
    as_dict = signals.as_dict()
    assert as_dict == {
        "sentiment": signals.sentiment,
        "specificity": signals.specificity,
        "topics": list(signals.topics),
        "expectation_gap": True,
        "severity_language": signals.severity_language,
        "source": SOURCE,
    }
    assert json.loads(json.dumps(as_dict)) == as_dict


def test_signals_are_immutable_and_hashable() -> None:
    signals = compute(record(summary="Timeout after 30s"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        signals.sentiment = 1.0  # type: ignore[misc]
    assert {signals, compute(record(summary="Timeout after 30s"))} == {signals}


# --- invariants -----------------------------------------------------------------------------------

AWKWARD = [
    "",
    "   \n\t ",
    "😡😡😡 👍",
    "!!!!!!!!",
    "\x00\x1f\u200b",
    "ñandú 日本語 العربية",
    "{" * 5000,
    "`" * 5000,
    "got when " * 1100,
    "expected " * 1200,
    "GET /a_b?c=1 500 'x' " * 500,
    "error " * 2000,
]


def check_invariants(text: str, limit: int = 6) -> None:
    assert -1.0 <= sentiment(text) <= 1.0
    assert 0.0 <= specificity(text) <= 1.0
    found = topics(text, limit)
    assert len(found) <= limit
    assert len(set(found)) == len(found)
    assert all(word == word.lower() and word for word in found)
    assert isinstance(expectation_gap(text), bool)
    assert severity_language(text) in {"low", "medium", "high"}


@pytest.mark.parametrize("text", AWKWARD)
def test_awkward_text_never_raises(text: str) -> None:
    check_invariants(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=1500), st.integers(min_value=0, max_value=8))
def test_any_text_keeps_every_signal_in_range(text: str, limit: int) -> None:
    check_invariants(text, limit)


#: Words and phrases each signal reacts to (tone, urgency, mildness, detail, topics, the
#: expectation gap): random text seldom holds any, so a record drawn only from it would show
#: nothing of which field feeds which signal.
SIGNAL_WORDS = [
    "great", "love it", "terrible", "broken", "awful", "thanks", "frustrating", "!!", "urgent", "data loss",
    "cannot", "completely", "minor", "would be nice", "typo", "GET", "/v2/orders?cursor=abc", "500", "30s",
    "`limit`", "page_size=50", "pagination", "webhooks", "export", "rate-limit", "expected", "but got",
    "instead of", "should have", "the docs say", "timeout", "\n", ".",
]
_FIELD_TEXT = st.none() | st.text(max_size=300) | st.lists(st.sampled_from(SIGNAL_WORDS), max_size=12).map(" ".join)


@settings(max_examples=80, deadline=None)
@given(st.fixed_dictionaries({name: _FIELD_TEXT for name in TEXT_FIELDS}))
def test_any_record_computes(fields: dict[str, str | None]) -> None:
    """Each signal is its function over the fields that feed it: every text field of an AFS
    record for specificity, topics and the gap; only the reporter's tone fields for sentiment
    and severity (not ``goal``, ``expected``, ``actual``)."""
    signals = compute(record(**fields))
    text = "\n".join(value for name in TEXT_FIELDS if (value := fields[name]) and value.strip())
    if not text:
        assert signals == Signals(None, None, None, None, None)
        return
    tone = "\n".join(value for name in TONE_FIELDS if (value := fields[name]) and value.strip())
    assert signals.sentiment == (sentiment(tone) if tone else None)
    assert signals.severity_language == (severity_language(tone) if tone else None)
    assert signals.specificity == specificity(text)
    assert signals.topics == tuple(topics(text))
    assert signals.expectation_gap == expectation_gap(text, fields["expected"], fields["actual"])
