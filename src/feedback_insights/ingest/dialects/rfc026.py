"""RFC-026 FEEDBACK messages: a person's thumbs-up or thumbs-down on one AI invocation.

Mapping: thumbs_up → lane positive_feedback, category other, rating 5, or a feature request
(lane feature_request, category missing_capability) when the comment asks for a change
(:func:`~feedback_insights.core.vocabulary.asks_for_change`: "Great answer; it would help if it
cited the policy"); thumbs_down → lane bug_or_failure, category incorrect_response, rating 1
(the response failed the person; a request in its comment is the remedy). ``app_id`` is the service,
``pseudonym_id`` the account; the rated exchange's ``user_query`` is the goal and its
``ai_response_snippet`` what the person actually got. A provided ``nlp`` object is kept as
given under ``metadata.nlp`` (later stages compute their own beside it). RFC-026 messages carry
no id of their own, so they get a content-derived one.
"""

from __future__ import annotations

from typing import Any

from ...core import DEFAULT_MAX_BYTES, CanonicalRecord, Problem, compact, shared_schemas
from ...core.vocabulary import asks_for_change
from .afp import body_size_problem
from .common import Origin

ORDER = 50
ACCOUNT_FIELDS = ("pseudonym_id",)
SERVICE_FIELDS = ("app_id",)

SCHEMAS = shared_schemas()


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and (
        obj.get("message_type") == "FEEDBACK" or ("rating" in obj and "pseudonym_id" in obj)
    )


def validate(obj: Any, max_bytes: int = DEFAULT_MAX_BYTES, size: int | None = None) -> list[Problem]:
    problems = SCHEMAS.check("rfc026.schema.json", obj)
    too_big = body_size_problem(obj, max_bytes, size) if isinstance(obj, dict) else None
    return [too_big, *problems] if too_big else problems


#: The lane of a thumbs-up, a thumbs-up whose comment asks for something, and a thumbs-down,
#: with the category that goes with each.
_UP = ("positive_feedback", "other")
_ASKS = ("feature_request", "missing_capability")
_DOWN = ("bug_or_failure", "incorrect_response")


def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
    up = obj["rating"] == "thumbs_up"
    lane, category = (_ASKS if asks_for_change(obj.get("comment") or "") else _UP) if up else _DOWN
    snapshot = obj.get("context") or {}
    return [
        {
            "id": origin.fallback_id,
            "dialect": "rfc026",
            "collector": origin.collector,
            "service": obj["app_id"],
            "account": obj["pseudonym_id"],
            "received_at": obj["timestamp"],
            "source": "human_authored",
            "lane": lane,
            "category": category,
            "outcome": None,
            "severity": None,
            "summary": obj.get("comment") or None,
            "goal": snapshot.get("user_query"),
            "detail": None,
            "tool": None,
            "method": None,
            "expected": None,
            "actual": snapshot.get("ai_response_snippet"),
            "suggestion": None,
            "workaround": None,
            "rating": 5 if up else 1,
            "request_id": obj["request_id"],
            "session_id": obj["session_id"],
            "trace_id": None,
            "message_id": None,
            "status": None,
            "issue_url": None,
            "agent": None,
            "evidence": compact({"relationship": obj.get("relationship"), "context": obj.get("context")}),
            "context": compact({"protocol_version": obj.get("protocol_version")}),
            "metadata": compact({"nlp": obj.get("nlp")}),
            "original": obj,
        }
    ]
