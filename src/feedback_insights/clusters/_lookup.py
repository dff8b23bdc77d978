"""One stored record as a maintainer asks for it: its canonical fields, its current status and
history, its signals, and the cluster it is in, per view."""

from __future__ import annotations

from typing import Any

from ..core import FIELDS
from ..warehouse import Warehouse

_RECORDS = f"""
SELECT {", ".join(f"r.{name}" for name in FIELDS)}, r.duplicate_of, r.ingested_at, r.redactions
FROM records r
WHERE r.id = $id AND ($collector IS NULL OR r.collector = $collector)
ORDER BY r.collector
"""

_CLUSTERS = """
SELECT m.view, m.cluster_id, c.label, c.status
FROM cluster_members m LEFT JOIN clusters c ON c.id = m.cluster_id
WHERE m.collector = $collector AND m.id = $id ORDER BY m.view DESC
"""


def find_records(warehouse: Warehouse, reference: str) -> list[dict[str, Any]]:
    """The records ``reference`` names (``id``, or ``collector:id`` when ids repeat across
    collectors), each with ``history`` (status changes seen), ``signals`` and ``clusters``."""
    collector, _, record_id = reference.rpartition(":")
    found = _rows(warehouse, _RECORDS, {"id": record_id, "collector": collector or None})
    if not found and collector:  # an id with a colon in it
        found = _rows(warehouse, _RECORDS, {"id": reference, "collector": None})
    for record in found:
        key = {"collector": record["collector"], "id": record["id"]}
        record["history"] = _rows(warehouse, """SELECT status, issue_url, seen_at FROM record_status_history
            WHERE collector = $collector AND id = $id ORDER BY seen_at""", key)
        signals = _rows(warehouse, """SELECT sentiment, specificity, topics, expectation_gap, severity_language, source
            FROM record_signals WHERE collector = $collector AND id = $id""", key)
        record["signals"] = signals[0] if signals else None
        record["clusters"] = {c.pop("view"): c for c in _rows(warehouse, _CLUSTERS, key)}
    return found


def _rows(warehouse: Warehouse, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = warehouse.con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
