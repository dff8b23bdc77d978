"""Which known issue a new report is: by its record id, or by a fingerprint of it.

The pipeline posts each filed cluster's member record ids and fingerprints (service, tool,
category, key terms). A fingerprint matches when every field it names equals the report's and
every term occurs in the report's text, so a new agent hitting the same wall is told at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import TEXT_FIELDS


def _text(record: Mapping[str, Any]) -> str:
    return "\n".join(str(record.get(f) or "") for f in TEXT_FIELDS).lower()


def fingerprint_matches(fingerprint: Mapping[str, Any], record: Mapping[str, Any], text: str) -> bool:
    for field in ("service", "tool", "category"):
        wanted = fingerprint.get(field)
        if wanted is not None and str(record.get(field) or "").lower() != wanted.lower():
            return False
    return all(re.search(rf"(?<!\w){re.escape(term.lower())}(?!\w)", text) for term in fingerprint.get("terms") or ())


class KnownIssues:
    """The collector's known issues, held in memory for the 202 path (reloaded on every change)."""

    def __init__(self, entries: Iterable[tuple[dict[str, Any], dict[str, Any]]] = ()) -> None:
        self.entries = [(issue, match, frozenset(match.get("record_ids") or ())) for issue, match in entries]

    def match(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The first known issue any of ``records`` (canonical) belongs to."""
        if not self.entries:
            return None
        for record in records:
            text = _text(record)
            for issue, match, record_ids in self.entries:
                if record.get("id") in record_ids:
                    return issue
                if any(fingerprint_matches(f, record, text) for f in match.get("fingerprints") or ()):
                    return issue
        return None
