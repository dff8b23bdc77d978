"""Which known issue a new report is: by its record id, by its meaning, or by its key terms.

The pipeline posts each filed cluster's member record ids, its meaning (the centroid of its
reports' vectors, the model that made them, the threshold: :class:`~feedback_insights.drafts.Meaning`)
and fingerprints (service, tool, key terms). A report whose id is listed is that issue, whatever
else is true. Otherwise it is the known issue of its own service whose centroid is nearest to its
vector, when that reaches the issue's threshold: the measure the pipeline's lookalikes use, on
the text the pipeline embeds (:func:`~feedback_insights.clusters.record_text`), so "filtered",
"unfiltered" and "parameter" are the same problem when they mean it.

Key terms (every term a whole word of the report's text, every field a fingerprint names equal to
the report's) judge only the issues no meaning can: one published without a meaning, or in a
model this collector does not run, and every issue while the collector has no vectors (its model
could not be loaded, or the submission's vector was not ready in time).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import TEXT_FIELDS
from ..drafts import Meaning, recognised, vector_space


def _text(record: Mapping[str, Any]) -> str:
    return "\n".join(str(record.get(f) or "") for f in TEXT_FIELDS).lower()


def fingerprint_matches(fingerprint: Mapping[str, Any], record: Mapping[str, Any], text: str) -> bool:
    for field in ("service", "tool", "category"):
        wanted = fingerprint.get(field)
        if wanted is not None and str(record.get(field) or "").lower() != wanted.lower():
            return False
    return all(re.search(rf"(?<!\w){re.escape(term.lower())}(?!\w)", text) for term in fingerprint.get("terms") or ())


@dataclass(frozen=True, slots=True)
class _Entry:
    issue: dict[str, Any]
    record_ids: frozenset[str]
    fingerprints: list[dict[str, Any]]
    service: str | None
    meaning: Meaning | None  # None: judged by its terms


def _meaning(match: Mapping[str, Any], space: str | None) -> Meaning | None:
    published = match.get("meaning")
    meaning = Meaning.from_json(published) if isinstance(published, Mapping) and space else None
    return meaning if meaning is not None and vector_space(meaning.model) == space else None


class KnownIssues:
    """The collector's known issues, held in memory for the 202 path (reloaded on every change).
    ``space`` is the vector space this collector's embedder computes (None: it has none)."""

    def __init__(self, entries: Iterable[tuple[dict[str, Any], dict[str, Any]]] = (), space: str | None = None) -> None:
        self.entries = [
            _Entry(issue, frozenset(match.get("record_ids") or ()), list(match.get("fingerprints") or ()),
                   (match.get("meaning") or {}).get("service"), _meaning(match, space))
            for issue, match in entries
        ]
        by_service: dict[str | None, list[_Entry]] = {}
        for entry in self.entries:
            if entry.meaning is not None:
                by_service.setdefault(entry.service, []).append(entry)
        self._by_meaning = by_service

    def by_meaning(self, service: str | None = None, *, any_service: bool = False) -> bool:
        """Whether some known issue (of ``service``) is recognised by meaning."""
        return bool(self._by_meaning) if any_service else service in self._by_meaning

    def match(self, records: Sequence[Mapping[str, Any]],
              vectors: Sequence[np.ndarray | None] | None = None) -> dict[str, Any] | None:
        """The known issue any of ``records`` (canonical) belongs to. ``vectors``: one per record
        (None for a record with no text to embed), or None when the collector has none."""
        if not self.entries:
            return None
        for record in records:
            for entry in self.entries:
                if record.get("id") in entry.record_ids:
                    return entry.issue
        for position, record in enumerate(records):
            vector = vectors[position] if vectors is not None else None
            candidates = self._by_meaning.get(record.get("service"), [])
            if vector is not None and candidates:
                chosen, _ = recognised(vector[None, :], [entry.meaning for entry in candidates if entry.meaning])
                if chosen[0] >= 0:
                    return candidates[int(chosen[0])].issue
            text = _text(record)
            for entry in self.entries:
                by_terms = entry.meaning is None or vectors is None
                if by_terms and any(fingerprint_matches(f, record, text) for f in entry.fingerprints):
                    return entry.issue
        return None
