"""What a drafted issue is made from: one cluster's demand and its reports, most telling first.

Reports are ordered so that the first few quoted are the most useful to a maintainer: the
cluster's medoid (the most typical report), then one report per account before a second from
any account (breadth over one agent's repetition), blocking before the rest, newest first.
Retries (``duplicate_of`` set) count as demand but are never quoted twice.

A report is a canonical record without its account (issues show accounts only as counts),
``metadata`` or ``original``: every scalar field (each a link placeholder) and the nested
``agent``, ``evidence`` and ``context`` as objects, because what made an in-session complaint
filable lives there (in-session-feedback-capture §1): the message it is about and the turn
before it (snapshots), the instance, and for a voice turn the dictation and the audio key.

A report of an owner-private source (:func:`~feedback_insights.ingest.sources.private_collectors`)
is marked ``private``, unless a maintainer quoted it into the cluster's draft explicitly
(``draft_quotes``, with who and why): its words, and the turn it quotes, are never rendered nor
shown to an LLM; the issue carries its category, tool and pointers instead, and a cluster
holding one is named in neutral words (:attr:`DraftInput.neutral_name`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from ..config import DraftsConfig, EvidenceLinks
from ..core import FIELDS, JSON_FIELDS
from ..ingest.sources import private_collectors
from ..warehouse import Warehouse

#: The nested fields a draft reads (parsed from JSON); the others stay in the warehouse.
NESTED_FIELDS = ("agent", "evidence", "context")
_COLUMNS = [f for f in FIELDS if f not in JSON_FIELDS and f != "account"] + list(NESTED_FIELDS)

_REPORTS = f"""
SELECT {", ".join("r." + column for column in _COLUMNS)},
       list_contains($private::VARCHAR[], r.collector) AND NOT EXISTS (
           SELECT 1 FROM draft_quotes q WHERE q.cluster_id = $cluster AND q.collector = r.collector AND q.id = r.id
       ) AS private,
       coalesce(r.account, r.collector || '/' || r.id) AS voice
FROM cluster_members m
JOIN records r USING (collector, id)
JOIN clusters c ON c.id = m.cluster_id
WHERE m.view = 'reports' AND m.cluster_id = $cluster AND r.duplicate_of IS NULL
  AND r.status IS DISTINCT FROM 'dismissed'
ORDER BY coalesce(r.collector = c.medoid_collector AND r.id = c.medoid_id, false) DESC,
         row_number() OVER (PARTITION BY coalesce(r.account, r.collector || '/' || r.id)
                            ORDER BY r.received_at DESC, r.id),
         (r.severity = 'blocking' OR r.outcome = 'blocked') DESC NULLS LAST,
         r.received_at DESC, r.id
"""

#: The pointers a report may carry, in the order issues show them; each may have a
#: ``[drafts.links]`` template (:class:`~feedback_insights.config.EvidenceLinks`).
EVIDENCE_FIELDS = tuple(EvidenceLinks.model_fields)
_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+|\s+[—–-]\s+")
#: A cluster's key term is shown for a cluster with private reports only when this many voices
#: (accounts; a report without one is a voice of its own) use it: the cluster's word, not one
#: owner's particulars (a name, a code, a phrase only they wrote).
SHARED_BY = 2
#: The texts a key term is looked for in (what clustering embedded draws on these).
_TERM_TEXTS = ("summary", "detail", "goal", "expected", "actual", "suggestion")


@dataclass(frozen=True, slots=True)
class Turn:
    """What a report holds about the turn it is about: snapshots of the message (``role``,
    ``at``, ``text``) and of the turn before it, and for a voice turn what the recogniser
    heard. Snapshots, because the pointers dangle once a chat is cleared or a trace pruned."""

    role: str | None
    at: str | None
    text: str | None
    before: str | None
    dictation: str | None


def turn(report: dict[str, Any]) -> Turn | None:
    """The turn ``report`` is about, or None when it carries none of it (most agent reports)."""
    evidence, context = report.get("evidence") or {}, report.get("context") or {}
    found = Turn(
        role=_str(evidence.get("target_role")),
        at=_str(evidence.get("target_at")),
        text=_str(evidence.get("target_text")),
        before=_str(evidence.get("prompt_text")),
        dictation=_str(context.get("dictation")),
    )
    return found if found.text or found.before or found.dictation else None


def agent_of(report: dict[str, Any]) -> str | None:
    """The agent a report is from or about, as "name · model · framework"."""
    agent = report.get("agent") or {}
    parts = [str(agent[key]) for key in ("name", "model", "framework") if agent.get(key)]
    return " · ".join(parts) or None


def pointers(report: dict[str, Any]) -> dict[str, str]:
    """The report's pointers (:data:`EVIDENCE_FIELDS`) that have a value, in that order."""
    values = EvidenceLinks.values(report)
    return {field: values[field] for field in EVIDENCE_FIELDS if field in values}


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _parsed(report: dict[str, Any]) -> dict[str, Any]:
    """The nested fields as objects (DuckDB hands JSON columns over as text)."""
    for field in NESTED_FIELDS:
        value = report.get(field)
        if isinstance(value, str):
            parsed = orjson.loads(value)
            report[field] = parsed if isinstance(parsed, dict) else None
    return report


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
    def name(self) -> str | None:
        """The cluster's name ("tool or endpoint: symptom", or a phrase when no tool is shared:
        clustering names clusters so), or None for a cluster without one, or labelled with key
        terms alone ("export · contacts · request", as clusters were before they had names).
        A cluster with private reports is called by its :attr:`neutral_name`: its label is one
        of its reports' summaries, which may be an owner's words."""
        if self.private_reports:
            return self.neutral_name
        return self.label if self.label and " · " not in self.label else None

    @property
    def private_reports(self) -> int:
        """How many of the reports are owner-private (their words stay with their owners)."""
        return sum(1 for r in self.reports if r.get("private"))

    def shown_terms(self) -> list[str]:
        """The key terms a body, a prompt or a fingerprint may show: all of them, or for a
        cluster with private reports those :data:`SHARED_BY` voices use."""
        if not self.private_reports:
            return self.key_terms
        voices: dict[str, set[str]] = {}
        for report in self.reports:
            words = set(re.findall(r"[a-z0-9_]+", " ".join(str(report.get(f) or "") for f in _TERM_TEXTS).lower()))
            for term in self.key_terms:
                if term.lower() in words:
                    voices.setdefault(term, set()).add(str(report.get("voice")))
        return [t for t in self.key_terms if len(voices.get(t, ())) >= SHARED_BY]

    @property
    def neutral_name(self) -> str:
        """A name that quotes no one: the tool or endpoint most reports name (else the
        service), the category most of them have, in words, and the terms many use — or, when
        no term is shared, the cluster's number, so that two such clusters never read alike."""
        tools = [r["tool"] for r in self.reports if r.get("tool")]
        common = max(sorted(set(tools)), key=tools.count) if tools else None
        thing = common if common and tools.count(common) * 2 >= len(self.reports) else self.service
        # The category, in words; "other" says nothing, so the lane says it ("positive feedback").
        kinds = [str(r["category"] if r.get("category") not in (None, "other") else r.get("lane") or "reports")
                 for r in self.reports]
        what = max(sorted(set(kinds)), key=kinds.count).replace("_", " ") if kinds else "reports"
        terms = self.shown_terms()[:3]
        return f"{thing}: {what} ({', '.join(terms) if terms else f'cluster {self.cluster_id}'})"

    @property
    def headline(self) -> str:
        """What the issue is about in a few words: the first sentence of the most typical
        report's summary; for a cluster with private reports, its :attr:`neutral_name`."""
        if self.private_reports:
            return self.neutral_name
        for report in self.reports:
            if report.get("summary"):
                summary = " ".join(str(report["summary"]).split())
                first = _SENTENCE_END.split(summary, maxsplit=1)[0]
                return first if len(first) >= 20 else summary
        return self.label or f"cluster {self.cluster_id}"

    def suggestions(self, limit: int) -> list[dict[str, Any]]:
        """Distinct suggestions, most telling first; a private report's are its own words."""
        seen: set[str] = set()
        picked = []
        for report in self.reports:
            text = "" if report.get("private") else (report.get("suggestion") or "").strip()
            if text and text.lower() not in seen:
                seen.add(text.lower())
                picked.append(report)
        return picked[:limit]

    def evidence(self) -> list[dict[str, Any]]:
        """The reports with a pointer to follow, in order: the evidence table's rows."""
        return [r for r in self.reports if pointers(r)]

    def newest(self) -> dict[str, Any] | None:
        """The report a demand-update comment quotes: the last one received."""
        return max(self.reports, key=lambda r: r["received_at"], default=None)

    def cited(self, settings: DraftsConfig | None = None) -> list[tuple[str, str]]:
        """The ``(collector, id)`` of every record the body cites, in body order: the quoted
        reports, the suggestions and the evidence rows under ``settings``' limits, so that
        erasing a record can find the drafts that quote it. Without ``settings``: every report
        of the draft, the records it may have drawn on, an LLM summary too (its prompt shows up
        to 20); the safe answer for a draft whose settings are not at hand."""
        if settings is None:
            picked = self.reports
        else:
            picked = [
                *self.reports[: settings.quoted_reports],
                *self.suggestions(settings.suggestions),
                *self.evidence()[: settings.evidence_rows],
            ]
        return list(dict.fromkeys((r["collector"], r["id"]) for r in picked))


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
        reports=[_parsed(r) for r in warehouse.con.sql(
            _REPORTS, params={"cluster": cluster_id, "private": sorted(private_collectors(warehouse.con))}).pl().to_dicts()],
    )
