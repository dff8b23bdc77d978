"""In-session, turn-anchored feedback: one ``agent_feedback`` row.

A person's complaint (or an agent's ``record_feedback`` call) about one turn, carrying both
pointers (trace_id, message_id, session_id, timeline_seq) and snapshots (target/prompt text),
because a pointer alone dangles and a snapshot alone loses the tool calls.

Mapping: the seed defines feedback as "the class where the platform is at fault", so a row is
a bug (lane bug_or_failure, category incorrect_response) unless it says otherwise. ``sentiment``
bad → bug, rating 1; good → rating 5 and praise (positive_feedback, category other), or a
feature request (feature_request, category missing_capability) when its words ask for a change
(:func:`~feedback_insights.core.vocabulary.asks_for_change`: the chip says the turn went well, the
words what the person wants next). The sentiment is optional, so a row without one takes its lane
from its words: a request when they ask for a change and report nothing wrong
(:func:`~feedback_insights.core.vocabulary.reads_as_complaint`), praise when they clearly praise
(:func:`~feedback_insights.core.vocabulary.reads_as_praise`), else a bug. ``author`` user →
source human_authored, agent → agent_authored. The row's triage ``status`` and ``issue_url`` are the record's own fields: the
SQL source reads them again when the row changes, and filing writes back to them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from ...core import DEFAULT_MAX_BYTES, CanonicalRecord, Problem, compact, depth_problem, join_path, shared_schemas
from ...core.vocabulary import asks_for_change, reads_as_complaint, reads_as_praise
from .common import Origin

ORDER = 40
#: A row never says which service it is about: its source's ``service`` does (required).
NAMES_SERVICE = False
ACCOUNT_FIELDS = ("user_id",)

SCHEMAS = shared_schemas()
_MARKERS = ("instance_id", "timeline_seq", "target_text", "surface")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "body" in obj and any(k in obj for k in _MARKERS)


def turn_context(row: dict[str, Any]) -> dict[str, Any] | None:
    """The row's ``context`` column (JSON text in SQL) as an object. After scrubbing, a
    redaction may have cut through the JSON; the text itself is kept in the original."""
    value = row.get("context")
    if isinstance(value, str) and value.strip():
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return value if isinstance(value, dict) else None


def validate(obj: Any, max_bytes: int = DEFAULT_MAX_BYTES, size: int | None = None) -> list[Problem]:
    problems = SCHEMAS.check("session.schema.json", obj)
    if isinstance(obj, dict) and isinstance(obj.get("context"), str) and obj["context"].strip():
        try:
            context = orjson.loads(obj["context"])
        except orjson.JSONDecodeError as exc:
            problems.append(Problem("context", f"is not valid JSON: {exc}"))
            return problems
        if not isinstance(context, dict):
            problems.append(Problem("context", "must be a JSON object"))
        # JSON text is structure all the same: the row nests as deep as its context does.
        elif (too_deep := depth_problem(context, level=2)) is not None:
            problems.append(Problem(join_path("context", too_deep.path), too_deep.message))
    return problems


#: Each lane a row can take, and the category that goes with it.
_CATEGORY = {"positive_feedback": "other", "feature_request": "missing_capability", "bug_or_failure": "incorrect_response"}


def _lane_of(sentiment: str | None, body: str) -> str:
    """The row's lane, from its sentiment chip and, where that leaves it open, its words
    (module docstring)."""
    if sentiment == "bad":
        return "bug_or_failure"
    if sentiment == "good":
        return "feature_request" if asks_for_change(body) else "positive_feedback"
    if asks_for_change(body) and not reads_as_complaint(body):
        return "feature_request"
    return "positive_feedback" if reads_as_praise(body) else "bug_or_failure"


def ms_to_iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
    turn = turn_context(obj) or {}
    lane = _lane_of(obj.get("sentiment"), obj["body"])
    rating = {"good": 5, "bad": 1}.get(obj.get("sentiment") or "")
    return [
        {
            "id": obj["id"],
            "dialect": "session",
            "collector": origin.collector,
            "service": origin.service,
            "account": obj["user_id"],
            "received_at": ms_to_iso(obj["ts"]),
            "source": "agent_authored" if obj.get("author") == "agent" else "human_authored",
            "lane": lane,
            "category": _CATEGORY[lane],
            "outcome": None,
            "severity": None,
            "summary": obj["body"],
            "goal": None,
            "detail": None,
            "tool": None,
            "method": None,
            "expected": None,
            "actual": None,
            "suggestion": None,
            "workaround": None,
            "rating": rating,
            "request_id": None,
            "session_id": obj.get("session_id"),
            "trace_id": obj.get("trace_id"),
            "message_id": obj.get("message_id"),
            "status": obj.get("status", "open"),
            "issue_url": obj.get("issue_url"),
            "agent": compact({"name": turn.get("agentSlug"), "model": turn.get("model"), "framework": turn.get("engine")}),
            "evidence": compact(
                {k: obj.get(k) for k in ("target_role", "target_text", "target_at", "prompt_text", "timeline_seq")}
            ),
            "context": compact(
                {
                    **turn,
                    "instance_id": obj["instance_id"],
                    "surface": obj["surface"],
                    "author": obj.get("author", "user"),
                }
            ),
            "metadata": None,
            "original": obj,
        }
    ]
