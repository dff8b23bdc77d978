"""The canonical record: one shape that every dialect normalises into.

Documented field by field in ``schemas/canonical_record.schema.json`` and, with the mapping
from each dialect, in the README. Records travel as plain dicts (cheap to build, cheap to turn
into columns); :class:`CanonicalRecord` is their static type.
"""

from __future__ import annotations

from typing import Any, TypedDict

#: Column order everywhere: JSONL output, the warehouse table, Polars frames.
FIELDS = (
    "id", "dialect", "collector", "service", "account", "received_at", "source", "lane",
    "category", "outcome", "severity", "summary", "goal", "detail", "tool", "method",
    "expected", "actual", "suggestion", "workaround", "rating", "request_id", "session_id",
    "trace_id", "message_id", "status", "issue_url", "agent", "evidence", "context", "metadata", "original",
)

#: Fields that hold nested JSON objects rather than scalars.
JSON_FIELDS = ("agent", "evidence", "context", "metadata", "original")

#: Free-text fields written by an agent or a person: untrusted, scrubbed, embedded.
TEXT_FIELDS = ("summary", "goal", "detail", "expected", "actual", "suggestion", "workaround")


class CanonicalRecord(TypedDict):
    id: str
    dialect: str
    collector: str
    service: str | None
    account: str | None
    received_at: str
    source: str
    lane: str
    category: str
    outcome: str | None
    severity: str | None
    summary: str | None
    goal: str | None
    detail: str | None
    tool: str | None
    method: str | None
    expected: str | None
    actual: str | None
    suggestion: str | None
    workaround: str | None
    rating: int | None
    request_id: str | None
    session_id: str | None
    trace_id: str | None
    message_id: str | None
    status: str | None
    issue_url: str | None
    agent: dict[str, Any] | None
    evidence: dict[str, Any] | None
    context: dict[str, Any] | None
    metadata: dict[str, Any] | None
    original: Any


def compact(mapping: dict[str, Any]) -> dict[str, Any] | None:
    """The mapping without None values; None when nothing is left."""
    kept = {k: v for k, v in mapping.items() if v is not None}
    return kept or None
