"""The MCP SEP-2369 feedback shape (``feedback/submit``), enveloped as JSON-RPC or bare.

One submission carries several items; each becomes its own record. The six categories and the
integer severity map by the Agent Feedback Spec's table (near misses normalised as for any
dialect: "Usability", "capability-gap", the twelve canonical categories and their synonyms; a
severity may also be named, "high", or a numeric string, "4")::

    usability → confusing_schema          severity 5 → blocking
    reliability → unhelpful_error                  4 → high
    documentation → docs_mismatch                  3 → medium
    efficiency → pagination_or_truncation          1–2 → low
    interoperability → other
    capability_gap → missing_capability

The lane follows from the category as for any report that names none (capability_gap →
feature_request; no outcome, so the rest is friction or its category's lane), except that an
``interoperability`` item (category ``other``) whose observation asks for a change is a
feature request (:func:`~feedback_insights.core.vocabulary.is_request`).

Draft fields without a canonical home (subcategory, confusedWith, confusedWithExternal,
onDemand, cadence, rollupMetrics, sessionMetrics …) are kept intact under
``metadata.sep2369``. SEP feedback is the agent runner's own end-of-session analysis, so its
source tier is ``runtime_observed``.
"""

from __future__ import annotations

from typing import Any

from ...core import DEFAULT_MAX_BYTES, CanonicalRecord, Problem, compact, join_path, shared_schemas
from ...core.vocabulary import (
    CATEGORIES,
    CATEGORY_SYNONYMS,
    SEVERITIES,
    derive_lane,
    is_request,
    near_miss,
    sep2369_summary,
    severity_of,
)
from .._envelope import is_enveloped, prefixed, validate_outer
from .afp import body_size_problem
from .common import Origin

ORDER = 30
#: SEP-2369 is the MCP shape the Agent Feedback Spec accepts: it travels under ``--dialect afs``.
CHOICE = "afs"
#: Attached by the receiver: on a collector envelope, beside the bare shape, or in JSON-RPC params.
ACCOUNT_FIELDS = ("account", "feedback.account", "params.account")
SERVICE_FIELDS = ("service", "feedback.service", "params.service")

SCHEMAS = shared_schemas()
_ITEM_FIELDS_WITH_A_HOME = {"category", "toolName", "severity", "observation"}
#: The proposal's own six, named when a category cannot be read.
_SEP_CATEGORIES = ("usability", "reliability", "documentation", "efficiency", "interoperability", "capability_gap")
_SUBMISSION_KEYS = ("feedbackVersion", "generatedAt", "cadence", "onDemand", "rollupMetrics")


def is_jsonrpc(obj: Any) -> bool:
    return isinstance(obj, dict) and "jsonrpc" in obj


def params(obj: Any) -> Any:
    """The bare SEP shape, wherever it sits (JSON-RPC params, collector envelope, or bare)."""
    if is_jsonrpc(obj):
        return obj.get("params")
    return obj["feedback"] if is_enveloped(obj) else obj


def looks_like(obj: Any) -> bool:
    if is_jsonrpc(obj):
        return True
    body = params(obj)
    return isinstance(body, dict) and isinstance(body.get("items"), list) and (
        "feedbackVersion" in body or "cadence" in body or "summary" not in body
    )


def validate(obj: Any, max_bytes: int = DEFAULT_MAX_BYTES, size: int | None = None) -> list[Problem]:
    if not isinstance(obj, dict):
        return [Problem("", "must be an object")]
    if is_jsonrpc(obj):
        problems = SCHEMAS.check("sep2369-envelope.schema.json", obj)
        where = "params"
    elif is_enveloped(obj):
        problems = validate_outer(obj) + prefixed(SCHEMAS.check("sep2369.schema.json", obj["feedback"]), "feedback")
        where = "feedback"
    else:
        problems = SCHEMAS.check("sep2369.schema.json", obj)
        where = ""
    problems += near_miss_problems(params(obj), where)
    too_big = body_size_problem(params(obj), max_bytes, size, where)
    return [too_big, *problems] if too_big else problems


def near_miss_problems(body: Any, where: str) -> list[Problem]:
    """Item categories and severities that fold to nothing known (the schema takes any string)."""
    items = body.get("items") if isinstance(body, dict) else None
    problems = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        path = join_path(where, f"items.{index}") if where else f"items.{index}"
        category, severity = item.get("category"), item.get("severity")
        if isinstance(category, str) and near_miss(category, CATEGORIES, CATEGORY_SYNONYMS) is None:
            problems.append(Problem(f"{path}.category", "must be one of: " + ", ".join(_SEP_CATEGORIES)))
        if isinstance(severity, str) and severity_of(severity) is None:
            problems.append(Problem(f"{path}.severity", "must be 1-5 or one of: " + ", ".join(SEVERITIES)))
    return problems


def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
    body = params(obj)
    outer = obj if is_enveloped(obj) else {}
    attached = {k: obj.get(k) or body.get(k) for k in ("service", "account", "received_at")}
    submission = {k: body[k] for k in _SUBMISSION_KEYS if k in body}
    if is_jsonrpc(obj) and obj.get("id") is not None:
        submission["jsonrpc_id"] = obj["id"]
    base_id = outer.get("id") or origin.fallback_id
    items = body["items"]
    return [
        _record(item, i, len(items), base_id, obj, origin, outer, attached, submission)
        for i, item in enumerate(items)
    ]


def _record(
    item: dict[str, Any],
    index: int,
    count: int,
    base_id: str,
    obj: dict[str, Any],
    origin: Origin,
    outer: dict[str, Any],
    attached: dict[str, Any],
    submission: dict[str, Any],
) -> CanonicalRecord:
    category = near_miss(item["category"], CATEGORIES, CATEGORY_SYNONYMS) or "other"
    tool = item.get("toolName") or next(iter(item.get("toolNames") or []), None)
    drafts = {k: v for k, v in item.items() if k not in _ITEM_FIELDS_WITH_A_HOME}
    summary = item.get("observation") or sep2369_summary(item["category"], item.get("subcategory"), tool)
    return {
        "id": base_id if count == 1 else f"{base_id}:{index}",
        "dialect": "sep2369",
        "collector": origin.collector,
        "service": outer.get("service") or attached["service"] or origin.service,
        "account": outer.get("account") or attached["account"],
        "received_at": outer.get("received_at")
        or attached["received_at"]
        or params(obj).get("generatedAt")
        or origin.received_at,
        "source": "runtime_observed",
        "lane": derive_lane(category, None, request=is_request(category, None, item.get("observation") or "")),
        "category": category,
        "outcome": None,
        "severity": severity_of(item.get("severity")),
        "summary": summary,
        "goal": None,
        "detail": None,
        "tool": tool,
        "method": None,
        "expected": None,
        "actual": None,
        "suggestion": None,
        "workaround": None,
        "rating": None,
        "request_id": None,
        "session_id": None,
        "trace_id": None,
        "message_id": None,
        "status": None,
        "issue_url": None,
        "agent": None,
        "evidence": compact({"session_metrics": item.get("sessionMetrics")}),
        "context": compact({"channel": outer.get("source"), "item": index if count > 1 else None}),
        "metadata": {"sep2369": {**submission, **drafts, "category": item["category"]}},
        "original": obj,
    }


#: What the reporter wrote: the parameters, without the JSON-RPC envelope or a collector's.
payload = params
