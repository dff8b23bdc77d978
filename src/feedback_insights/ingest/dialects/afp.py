"""Agent Feedback Protocol v0.1: the submission and the collector record around it.

Validation uses the spec's own schemas (``schemas/afp/``, copied verbatim), compiled. Unknown
fields and unknown enum values are errors, as §3.1 and §9 require. A record is recognised by
its ``feedback`` object.

Mapping (AFP ``type`` → canonical category and lane)::

    missing_capability     → missing_capability    feature_request
    bug                    → incorrect_response    bug_or_failure
    unclear_documentation  → docs_mismatch         docs_feedback
    unexpected_response    → incorrect_response    schema_feedback
    unhelpful_error        → unhelpful_error       by outcome (blocked → bug_or_failure, else friction)
    performance            → rate_limit_or_timeout by outcome
    other                  → other                 positive_feedback when outcome is completed,
                                                   else by outcome

AFP has no praise type; an ``other`` report on a completed task is the nearest thing to it.
"""

from __future__ import annotations

from typing import Any

from ...core import DEFAULT_MAX_BYTES, CanonicalRecord, Problem, SchemaSet, compact, jsontext, schemas_dir
from ...core.vocabulary import derive_lane
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


def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
    record = obj if is_enveloped(obj) else {}
    body = obj["feedback"] if record else obj
    category, lane = TYPE_MAP[body["type"]]
    outcome = body.get("outcome")
    if lane is None:
        lane = derive_lane(category, outcome, positive=body["type"] == "other" and outcome == "completed")
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
