"""Agent Feedback Protocol v0.1: the submission and the collector record around it.

Validation uses the spec's own schemas (``schemas/afp/``, copied verbatim), compiled. Unknown
fields and unknown enum values are errors, as §3.1 and §9 require. A record is recognised by
its ``feedback`` object.

Mapping (AFP ``type`` → canonical category and lane)::

    missing_capability     → missing_capability    feature_request
    bug                    → incorrect_response    bug_or_failure
    unclear_documentation  → docs_mismatch         docs_feedback
    unexpected_response    → incorrect_response    schema_feedback
    unhelpful_error        → unhelpful_error       by outcome (below)
    performance            → rate_limit_or_timeout by outcome
    other                  → other                 by outcome

The schema defines each outcome: ``blocked`` (the task could not be completed) → bug_or_failure;
``degraded`` (completed, but worse or slower) → friction; ``completed`` ("completed fine; the
feedback is a suggestion") → feature_request. AFP has no praise type, and §6 limits reports to
what prevented or complicated the task, so agents file praise as ``other`` on a completed task:
such a report that asks for nothing (no ``suggestion``, no request in its ``message``:
:func:`~feedback_insights.core.vocabulary.asks_for_change`) is praise, and so is a completed
``unhelpful_error`` or ``performance`` report whose words clearly praise
(:func:`~feedback_insights.core.vocabulary.reads_as_praise`). An ``other`` report of a task
not blocked (degraded, or no outcome) that asks for a change is a feature request too
(:func:`~feedback_insights.core.vocabulary.is_request`); without an outcome the rest is friction.
"""

from __future__ import annotations

from typing import Any

from ...core import DEFAULT_MAX_BYTES, CanonicalRecord, Problem, SchemaSet, compact, jsontext, schemas_dir
from ...core.vocabulary import asks_for_change, derive_lane, is_request, reads_as_praise
from .._envelope import is_enveloped
from .._envelope import payload as payload  # the dialect's payload(): the body inside a record
from .common import Origin

#: Auto-detection tries AFP first: most reports arrive in it.
ORDER = 10
#: A collector record's account and service (a bare submission has neither).
ACCOUNT_FIELDS = ("account",)
SERVICE_FIELDS = ("service",)

SCHEMAS = SchemaSet(schemas_dir() / "afp")

TYPE_MAP: dict[str, tuple[str, str | None]] = {
    "missing_capability": ("missing_capability", "feature_request"),
    "bug": ("incorrect_response", "bug_or_failure"),
    "unclear_documentation": ("docs_mismatch", "docs_feedback"),
    "unexpected_response": ("incorrect_response", "schema_feedback"),
    "unhelpful_error": ("unhelpful_error", None),
    "performance": ("rate_limit_or_timeout", None),
    "other": ("other", None),
}

#: Keys no AFP submission can carry (unknown fields are rejected) but other dialects' do.
_FOREIGN = frozenset({"tool_name", "toolName", "summary", "items", "jsonrpc"})


def looks_like(obj: Any) -> bool:
    body = obj.get("feedback") if is_enveloped(obj) else obj
    return (
        isinstance(body, dict)
        and ("goal" in body or ("type" in body and "message" in body))
        and _FOREIGN.isdisjoint(body)
    )


def validate(obj: Any, max_bytes: int = DEFAULT_MAX_BYTES, size: int | None = None) -> list[Problem]:
    """Problems with a submission or a record; ``size`` is the raw byte length when known."""
    if is_enveloped(obj):
        problems = SCHEMAS.check("record.schema.json", obj)
        body, where = obj["feedback"], "feedback"
    else:
        problems = SCHEMAS.check("feedback.schema.json", obj)
        body, where = obj, ""
    too_big = body_size_problem(body, max_bytes, size, where)
    return [too_big, *problems] if too_big else problems


def body_size_problem(body: Any, max_bytes: int, size: int | None, where: str = "") -> Problem | None:
    """The 16 KiB rule (§3) applies to the submission, not to an envelope around it."""
    if size is not None and size <= max_bytes:
        return None
    actual = len(jsontext.dumps(body))
    if actual <= max_bytes:
        return None
    return Problem(where, f"body is {actual} bytes; the limit is {max_bytes} bytes")


def _lane_by_outcome(category: str, outcome: str | None, message: str, suggestion: str | None) -> str:
    """The lane of a report whose type leaves it to the outcome (module docstring)."""
    if outcome != "completed":
        return derive_lane(category, outcome, request=is_request(category, outcome, message))
    if suggestion and suggestion.strip() or asks_for_change(message):
        return "feature_request"
    praise = category == "other" or reads_as_praise(message)
    return "positive_feedback" if praise else "feature_request"


def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
    record = obj if is_enveloped(obj) else {}
    body = obj["feedback"] if record else obj
    category, lane = TYPE_MAP[body["type"]]
    outcome = body.get("outcome")
    if lane is None:
        lane = _lane_by_outcome(category, outcome, body["message"], body.get("suggestion"))
    return [
        {
            "id": record.get("id") or origin.fallback_id,
            "dialect": "afp",
            "collector": origin.collector,
            "service": record.get("service") or origin.service,
            "account": record.get("account"),
            "received_at": record.get("received_at") or origin.received_at,
            "source": "agent_authored",
            "lane": lane,
            "category": category,
            "outcome": outcome,
            "severity": None,
            "summary": body["message"],
            "goal": body["goal"],
            "detail": None,
            "tool": body.get("endpoint"),
            "method": body.get("method"),
            "expected": body.get("expected"),
            "actual": None,
            "suggestion": body.get("suggestion"),
            "workaround": body.get("workaround_description"),
            "rating": None,
            "request_id": body.get("request_id"),
            "session_id": body.get("session_id"),
            "trace_id": None,
            "message_id": None,
            "status": None,
            "issue_url": None,
            "agent": body.get("agent"),
            "evidence": body.get("evidence"),
            "context": compact(
                {
                    "channel": record.get("source"),
                    "workaround_found": body.get("workaround"),
                    "afp_type": body["type"],
                }
            ),
            "metadata": body.get("metadata"),
            "original": obj,
        }
    ]
