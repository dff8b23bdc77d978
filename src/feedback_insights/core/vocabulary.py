"""The canonical vocabulary every dialect maps onto, and the near-miss normaliser.

Lanes and categories are the Agent Feedback Spec v1's; the tables that map the other dialects
onto them live in the dialect modules and are documented in the README. Receivers are told to
"accept near-miss values and normalise rather than reject", so :func:`near_miss` folds case,
separators and a table of common synonyms before giving up.
"""

from __future__ import annotations

import re

LANES = (
    "support_ticket",
    "bug_or_failure",
    "friction",
    "feature_request",
    "docs_feedback",
    "schema_feedback",
    "workflow_feedback",
    "positive_feedback",
)

CATEGORIES = (
    "missing_capability",
    "confusing_schema",
    "bad_tool_description",
    "incomplete_response",
    "incorrect_response",
    "unhelpful_error",
    "authentication_problem",
    "pagination_or_truncation",
    "rate_limit_or_timeout",
    "docs_mismatch",
    "wrong_tool_selected",
    "other",
)

SEVERITIES = ("blocking", "high", "medium", "low")

#: One outcome set for all dialects. AFP's task-level values and AFS's exit states are kept
#: apart (an AFP "blocked" is not silently an AFS "failure"); :data:`OUTCOME_CLASS` groups them
#: when a report needs one scale.
OUTCOMES = ("blocked", "degraded", "completed", "failure", "partial_success", "success")
OUTCOME_CLASS = {
    "blocked": "failed",
    "failure": "failed",
    "degraded": "impaired",
    "partial_success": "impaired",
    "completed": "ok",
    "success": "ok",
}

#: The four-tier signal model of the AFS, plus the tier for feedback a person wrote
#: (in-session complaints, RFC-026 thumbs).
SOURCES = ("agent_authored", "agent_solicited", "server_observed", "runtime_observed", "human_authored")

_SEPARATORS = re.compile(r"[\s\-./_]+")

LANE_SYNONYMS = {
    "bug": "bug_or_failure",
    "failure": "bug_or_failure",
    "error": "bug_or_failure",
    "broken": "bug_or_failure",
    "support": "support_ticket",
    "ticket": "support_ticket",
    "feature": "feature_request",
    "request": "feature_request",
    "enhancement": "feature_request",
    "docs": "docs_feedback",
    "documentation": "docs_feedback",
    "doc": "docs_feedback",
    "schema": "schema_feedback",
    "workflow": "workflow_feedback",
    "flow": "workflow_feedback",
    "positive": "positive_feedback",
    "praise": "positive_feedback",
    "kudos": "positive_feedback",
    "ux": "friction",
    "usability": "friction",
}

CATEGORY_SYNONYMS = {
    "feature_request": "missing_capability",
    "feature": "missing_capability",
    "missing_feature": "missing_capability",
    "missing": "missing_capability",
    "schema": "confusing_schema",
    "confusing_parameters": "confusing_schema",
    # The MCP SEP-2369 six, as the Agent Feedback Spec maps them.
    "usability": "confusing_schema",
    "reliability": "unhelpful_error",
    "documentation": "docs_mismatch",
    "efficiency": "pagination_or_truncation",
    "interoperability": "other",
    "capability_gap": "missing_capability",
    "tool_description": "bad_tool_description",
    "bad_description": "bad_tool_description",
    "incomplete": "incomplete_response",
    "partial_response": "incomplete_response",
    "incorrect": "incorrect_response",
    "wrong_response": "incorrect_response",
    "bug": "incorrect_response",
    "wrong_result": "incorrect_response",
    "error_message": "unhelpful_error",
    "bad_error": "unhelpful_error",
    "unclear_error": "unhelpful_error",
    "auth": "authentication_problem",
    "authentication": "authentication_problem",
    "authorization": "authentication_problem",
    "permissions": "authentication_problem",
    "pagination": "pagination_or_truncation",
    "truncation": "pagination_or_truncation",
    "truncated": "pagination_or_truncation",
    "rate_limit": "rate_limit_or_timeout",
    "ratelimit": "rate_limit_or_timeout",
    "rate_limited": "rate_limit_or_timeout",
    "timeout": "rate_limit_or_timeout",
    "timeouts": "rate_limit_or_timeout",
    "performance": "rate_limit_or_timeout",
    "slow": "rate_limit_or_timeout",
    "latency": "rate_limit_or_timeout",
    "docs": "docs_mismatch",
    "docs_feedback": "docs_mismatch",
    "doc": "docs_mismatch",
    "wrong_tool": "wrong_tool_selected",
    "misc": "other",
    "unknown": "other",
}

SEVERITY_SYNONYMS = {
    "critical": "blocking",
    "blocker": "blocking",
    "fatal": "blocking",
    "urgent": "blocking",
    "major": "high",
    "severe": "high",
    "moderate": "medium",
    "normal": "medium",
    "med": "medium",
    "minor": "low",
    "trivial": "low",
}

AFS_OUTCOME_SYNONYMS = {
    "failed": "failure",
    "fail": "failure",
    "error": "failure",
    "blocked": "failure",
    "partial": "partial_success",
    "partially_succeeded": "partial_success",
    "degraded": "partial_success",
    "succeeded": "success",
    "ok": "success",
    "completed": "success",
    "done": "success",
}


def fold(value: str) -> str:
    """"Feature Request", "feature-request" and "FEATURE_REQUEST" all fold to feature_request."""
    return _SEPARATORS.sub("_", value.strip().lower()).strip("_")


def near_miss(value: object, allowed: tuple[str, ...], synonyms: dict[str, str]) -> str | None:
    """The allowed value ``value`` means, or None when it is not recognisable."""
    if not isinstance(value, str):
        return None
    folded = fold(value)
    for candidate in (folded, folded[:-1] if folded.endswith("s") else None):
        if candidate in allowed:
            return candidate
        if candidate in synonyms:
            return synonyms[candidate]
    return None


#: Lane of a report by its category when the dialect gives no lane. Categories whose lane
#: depends on how the task ended map to None here and are decided by :func:`derive_lane`.
_LANE_BY_CATEGORY = {
    "missing_capability": "feature_request",
    "docs_mismatch": "docs_feedback",
    "bad_tool_description": "docs_feedback",
    "confusing_schema": "schema_feedback",
    "wrong_tool_selected": "workflow_feedback",
    "incorrect_response": "bug_or_failure",
    "incomplete_response": "bug_or_failure",
}


def derive_lane(category: str | None, outcome: str | None, positive: bool = False) -> str:
    """The AFS rule for a report that names no lane: from its category, outcome and sentiment.

    Praise wins; then the category's own lane; for the rest (errors, auth, pagination, rate
    limits, other) a task that failed is a bug, anything else is friction.
    """
    if positive:
        return "positive_feedback"
    lane = _LANE_BY_CATEGORY.get(category or "")
    if lane:
        return lane
    if outcome is not None and OUTCOME_CLASS.get(outcome) == "failed":
        return "bug_or_failure"
    return "friction"


def near_miss_pattern(allowed: tuple[str, ...], synonyms: dict[str, str]) -> str:
    """An ECMA-262 regex (as JSON Schema ``pattern`` wants) for exactly the strings
    :func:`near_miss` accepts: any case, any run of separators between words, a plural ``s``."""
    def word(folded: str) -> str:
        parts = ("".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in part) for part in folded.split("_"))
        return r"[\s\-./_]+".join(parts)

    words = sorted(set(allowed) | set(synonyms), key=len, reverse=True)
    return r"^[\s\-./_]*(?:" + "|".join(word(w) for w in words) + r")[sS]?[\s\-./_]*$"
