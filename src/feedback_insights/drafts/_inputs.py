"""What a drafted issue is made from: one cluster's demand and its reports, most telling first.

Reports are ordered so that the first few quoted are the most useful to a maintainer: the
cluster's medoid (the most typical report), then one report per account before a second from
any account (breadth over one agent's repetition), blocking before the rest, newest first.
Retries (``duplicate_of`` set) count as demand but are never quoted twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..warehouse import Warehouse

_REPORTS = """
SELECT r.collector, r.id, r.received_at, r.lane, r.category, r.severity, r.outcome, r.tool,
       r.method, r.summary, r.detail, r.expected, r.actual, r.suggestion,
       r.request_id, r.trace_id, r.session_id, r.message_id
FROM cluster_members m
JOIN records r USING (collector, id)
JOIN clusters c ON c.id = m.cluster_id
WHERE m.view = 'reports' AND m.cluster_id = $cluster AND r.duplicate_of IS NULL
ORDER BY coalesce(r.collector = c.medoid_collector AND r.id = c.medoid_id, false) DESC,
         row_number() OVER (PARTITION BY coalesce(r.account, r.collector || '/' || r.id)
                            ORDER BY r.received_at DESC, r.id),
         (r.severity = 'blocking' OR r.outcome = 'blocked') DESC NULLS LAST,
         r.received_at DESC, r.id
"""

EVIDENCE_FIELDS = ("request_id", "trace_id", "session_id", "message_id")
_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+|\s+[—–-]\s+")


@dataclass(frozen=True, slots=True)
class DraftInput:
    cluster_id: int
    service: str
    label: str | None
    key_terms: list[str]
    #: One row of :func:`~feedback_insights.clusters.demand`.
    demand: dict[str, Any]
    #: Every distinct report of the cluster, most telling first.
    reports: list[dict[str, Any]]

    @property
    def headline(self) -> str:
        """What the issue is about in a few words: the first sentence of the most typical
        report's summary."""
        for report in self.reports:
            if report.get("summary"):
                summary = " ".join(str(report["summary"]).split())
                first = _SENTENCE_END.split(summary, maxsplit=1)[0]
                return first if len(first) >= 20 else summary
        return self.label or f"cluster {self.cluster_id}"

    def suggestions(self, limit: int) -> list[dict[str, Any]]:
        seen: set[str] = set()
        picked = []
        for report in self.reports:
            text = (report.get("suggestion") or "").strip()
            if text and text.lower() not in seen:
                seen.add(text.lower())
                picked.append(report)
        return picked[:limit]

    def evidence(self) -> list[dict[str, Any]]:
        return [r for r in self.reports if any(r.get(f) for f in EVIDENCE_FIELDS)]


def draft_input(warehouse: Warehouse, figures: dict[str, Any]) -> DraftInput:
    """The input for the cluster of one :func:`~feedback_insights.clusters.demand` row."""
    cluster_id = figures["cluster_id"]
    terms = warehouse.con.execute("SELECT key_terms FROM clusters WHERE id = ?", [cluster_id]).fetchall()
    return DraftInput(
        cluster_id=cluster_id,
        service=figures["service"] or "an unnamed service",
        label=figures["label"],
        key_terms=list(terms[0][0] or []) if terms else [],
        demand=figures,
        reports=warehouse.con.sql(_REPORTS, params={"cluster": cluster_id}).pl().to_dicts(),
    )
