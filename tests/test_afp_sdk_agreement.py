"""Our AFP validator and the AFP's own SDK (backloop-sdk) agree on near-valid submissions."""

from __future__ import annotations

from typing import Any

from backloop import validate_record, validate_submission
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedback_insights.ingest.dialects import afp

FIELDS = {
    "spec_version": st.sampled_from(["0.1", "1.0", "", "0.2"]),
    "type": st.sampled_from(["missing_capability", "bug", "performance", "other", "feature_request", "Bug", ""]),
    "goal": st.text(max_size=12) | st.just("g" * 1001) | st.just("g" * 1000),
    "message": st.text(max_size=12) | st.just("m" * 4001),
    "endpoint": st.text(max_size=6) | st.just("e" * 513),
    "method": st.sampled_from(["GET", "POST", "FETCH", "get", "OPTIONS"]),
    "outcome": st.sampled_from(["blocked", "degraded", "completed", "failed", "success"]),
    "workaround": st.booleans() | st.sampled_from(["no", 0, 1, None]),
    "workaround_description": st.text(max_size=5) | st.just("w" * 2001),
    "request_id": st.text(max_size=5) | st.just("r" * 257),
    "session_id": st.text(max_size=5),
    "agent": st.dictionaries(
        st.sampled_from(["name", "version", "model", "framework", "api_key"]),
        st.text(max_size=4) | st.integers() | st.just("n" * 129),
        max_size=3,
    ),
    "evidence": st.dictionaries(
        st.sampled_from(["status_code", "request", "response_excerpt", "headers"]),
        st.integers(min_value=0, max_value=800)
        | st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=800)
        | st.booleans()
        | st.text(max_size=4)
        | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        max_size=3,
    ),
    "metadata": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2) | st.lists(st.integers(), max_size=2),
}
JUNK = st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.lists(st.integers(), max_size=2)


@st.composite
def near_valid_submissions(draw: st.DrawFn) -> Any:
    submission: dict[str, Any] = {"type": "bug", "goal": "Export contacts", "message": "400 with no field named"}
    for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=5, unique=True)):
        submission[name] = draw(FIELDS[name])
    for name in draw(st.lists(st.sampled_from(["type", "goal", "message"]), max_size=2, unique=True)):
        del submission[name]
    if draw(st.integers(0, 9)) == 0:
        submission[draw(st.sampled_from(["severity", "Goal", "tool_name", "extra"]))] = draw(JUNK)
    if draw(st.integers(0, 9)) == 0:
        submission[draw(st.sampled_from(sorted(FIELDS)))] = draw(JUNK)
    if draw(st.integers(0, 19)) == 0:
        return draw(JUNK)
    return submission


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid_submissions())
def test_submission_verdicts_agree_with_the_sdk(submission: Any) -> None:
    ours = afp.validate(submission, max_bytes=10**9)
    theirs = validate_submission(submission)
    assert (not ours) == theirs.valid, (ours, theirs.issues)
    # Where both reject, they point at the same fields.
    if ours:
        assert {p.path for p in ours} == {i["path"] for i in theirs.issues}


@settings(max_examples=300, deadline=None)
@given(near_valid_submissions(), st.sampled_from(["http", "mcp", "sdk", "other", "email"]))
def test_record_verdicts_agree_with_the_sdk(submission: Any, source: str) -> None:
    record = {"id": "fb_1", "received_at": "2026-09-28T10:04:11Z", "source": source, "feedback": submission}
    assert (not afp.validate(record, max_bytes=10**9)) == validate_record(record).valid
