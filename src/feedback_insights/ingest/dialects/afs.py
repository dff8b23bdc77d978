"""Agent Feedback Spec v1: ``POST /api/v1/feedback``, snake_case or camelCase.

The spec asks receivers to "accept near-miss values and normalise rather than reject", so
enumerated fields go through :func:`~feedback_insights.core.vocabulary.near_miss`, a severity
may also be a number on the spec's one integer scale (5 → blocking … 1–2 → low, as for
SEP-2369) and a satisfaction score a numeric string ("4"); only values that fold to nothing
recognisable are problems. ``feedback_type`` (the lane) is derived "from category, outcome, and
sentiment" when omitted: a report with no friction category on a task that did not fail is a
``feature_request`` ("a capability, field, mode, or endpoint the agent wanted") when it asks for
one — in its summary or detail ("Please add a CSV export option"), or with a ``suggested_fix``
on a task that succeeded (:func:`~feedback_insights.core.vocabulary.is_request`); otherwise praise
when it succeeded with a positive sentiment (:func:`~feedback_insights.core.vocabulary.is_praise`:
the satisfaction score, else the tone of the summary and detail); otherwise the category and
outcome decide. The body may arrive bare or in the collector envelope.
"""

from __future__ import annotations

from typing import Any

from ...core import DEFAULT_MAX_BYTES, CanonicalRecord, Problem, compact, join_path, shared_schemas
from ...core.vocabulary import (
    AFS_OUTCOME_SYNONYMS,
    CATEGORIES,
    CATEGORY_SYNONYMS,
    LANE_SYNONYMS,
    LANES,
    SEVERITIES,
    SEVERITY_SYNONYMS,
    derive_lane,
    is_praise,
    is_request,
    near_miss,
    satisfaction_of,
    severity_of,
)
from .._envelope import is_enveloped, prefixed, validate_outer
from .._envelope import payload as payload  # the dialect's payload(): the body inside a record
from .afp import body_size_problem
from .common import Origin

ORDER = 20
#: The collector envelope's account and service (a bare body has neither).
ACCOUNT_FIELDS = ("account",)
SERVICE_FIELDS = ("service",)

SCHEMAS = shared_schemas()

CAMEL_TO_SNAKE = {
    "toolName": "tool_name",
    "feedbackType": "feedback_type",
    "satisfactionScore": "satisfaction_score",
    "suggestedFix": "suggested_fix",
    "attemptedCalls": "attempted_calls",
    "requestId": "request_id",
    "sessionId": "session_id",
    "traceId": "trace_id",
}
OUTCOMES = ("success", "partial_success", "failure")
AFS_SOURCES = ("agent_authored", "agent_solicited", "server_observed", "runtime_observed")

#: Field → (accepted values, synonyms): the enumerated fields and how near misses fold.
ENUMS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "feedback_type": (LANES, LANE_SYNONYMS),
    "category": (CATEGORIES, CATEGORY_SYNONYMS),
    "outcome": (OUTCOMES, AFS_OUTCOME_SYNONYMS),
    "severity": (SEVERITIES, SEVERITY_SYNONYMS),
    "source": (AFS_SOURCES, {}),
}

#: The category a report implies when it names only its lane.
CATEGORY_BY_LANE = {
    "feature_request": "missing_capability",
    "docs_feedback": "docs_mismatch",
    "schema_feedback": "confusing_schema",
    "workflow_feedback": "wrong_tool_selected",
}


def looks_like(obj: Any) -> bool:
    body = obj.get("feedback") if is_enveloped(obj) else obj
    return isinstance(body, dict) and (
        "tool_name" in body or "toolName" in body or ("summary" in body and "goal" not in body)
    )


def snake_case(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[Problem]]:
    """The body with camelCase keys renamed, the names the sender used, and any conflicts."""
    renamed: dict[str, Any] = {}
    sent_as: dict[str, str] = {}
    problems: list[Problem] = []
    for key, value in body.items():
        name = CAMEL_TO_SNAKE.get(key, key)
        if name in renamed and renamed[name] != value:
            problems.append(Problem(key, f"conflicts with {sent_as[name]}: send one of the two"))
            continue
        renamed[name] = value
        sent_as[name] = key
    return renamed, sent_as, problems


def validate(obj: Any, max_bytes: int = DEFAULT_MAX_BYTES, size: int | None = None) -> list[Problem]:
    if not isinstance(obj, dict):
        return [Problem("", "must be an object")]
    problems: list[Problem] = []
    body, where = obj, ""
    if is_enveloped(obj):
        problems += validate_outer(obj)
        body, where = obj["feedback"], "feedback"
    too_big = body_size_problem(body, max_bytes, size, where)
    if too_big:
        problems.insert(0, too_big)
    problems += prefixed(validate_body(body), where) if where else validate_body(body)
    return problems


def validate_body(body: dict[str, Any]) -> list[Problem]:
    renamed, sent_as, problems = snake_case(body)
    for problem in SCHEMAS.check("afs.schema.json", renamed):
        head, _, rest = problem.path.partition(".")
        problems.append(Problem(join_path(sent_as.get(head, head), rest) if rest else sent_as.get(head, head), problem.message))
    for field, (allowed, synonyms) in ENUMS.items():
        value = renamed.get(field)
        if isinstance(value, str) and near_miss(value, allowed, synonyms) is None:
            problems.append(Problem(sent_as[field], "must be one of: " + ", ".join(allowed)))
    return problems


def _words(body: dict[str, Any]) -> str:
    """What the report says happened: whose tone decides praise when no score does, and
    whose asking makes it a request."""
    return "\n".join(text for text in (body.get("summary"), body.get("detail")) if isinstance(text, str))


def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
    envelope = obj if is_enveloped(obj) else {}
    body, _, _ = snake_case(envelope["feedback"] if envelope else obj)
    fields = {f: near_miss(body.get(f), *ENUMS[f]) for f in ENUMS} | {"severity": severity_of(body.get("severity"))}
    category, outcome = fields["category"], fields["outcome"]
    score = satisfaction_of(body.get("satisfaction_score"))
    words = _words(body)
    lane = fields["feedback_type"] or derive_lane(
        category, outcome, positive=is_praise(category, outcome, score, words),
        request=is_request(category, outcome, words, body.get("suggested_fix")),
    )
    return [
        {
            "id": envelope.get("id") or origin.fallback_id,
            "dialect": "afs",
            "collector": origin.collector,
            "service": envelope.get("service") or origin.service,
            "account": envelope.get("account"),
            "received_at": envelope.get("received_at") or origin.received_at,
            "source": fields["source"] or "agent_authored",
            "lane": lane,
            "category": category or CATEGORY_BY_LANE.get(lane, "other"),
            "outcome": outcome,
            "severity": fields["severity"],
            "summary": body["summary"],
            "goal": body.get("goal"),
            "detail": body.get("detail"),
            "tool": body["tool_name"],
            "method": None,
            "expected": body.get("expected"),
            "actual": body.get("actual"),
            "suggestion": body.get("suggested_fix"),
            "workaround": None,
            "rating": score,
            "request_id": body.get("request_id"),
            "session_id": body.get("session_id"),
            "trace_id": body.get("trace_id"),
            "message_id": None,
            "status": None,
            "issue_url": None,
            "agent": body.get("agent"),
            "evidence": compact({"attempted_calls": body.get("attempted_calls"), "impact": body.get("impact")}),
            "context": compact({"channel": envelope.get("source")}),
            "metadata": body.get("metadata"),
            "original": obj,
        }
    ]
