"""The signals stage: compute RFC-026 signals for every stored record that has none yet.

Reads the scrubbed text from the warehouse (so nothing unscrubbed is ever scored) and writes
``record_signals`` batch by batch; a re-run scores only records ingested since, and those whose
signals an older version of the heuristics computed (``source`` differs from :data:`SOURCE`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ..core import TEXT_FIELDS, now_utc
from ..warehouse import Warehouse, registered
from ._heuristics import SOURCE, compute

#: What :func:`compute` reads of a record: its text, and what says which text is the comment.
_PENDING = f"""
SELECT r.collector, r.id, r.dialect, r.tool,
       r.metadata->>'$.sep2369.category' AS sep_category, r.metadata->>'$.sep2369.subcategory' AS sep_subcategory,
       {", ".join(f"r.{name}" for name in TEXT_FIELDS)}
FROM records r ANTI JOIN record_signals s ON s.collector = r.collector AND s.id = r.id AND s.source = $source
ORDER BY r.received_at, r.collector, r.id
LIMIT $limit
"""

_SCORED = pa.schema([
    ("collector", pa.string()), ("id", pa.string()), ("sentiment", pa.float64()), ("specificity", pa.float64()),
    ("topics", pa.list_(pa.string())), ("expectation_gap", pa.bool_()), ("severity_language", pa.string()),
])


def _record(row: tuple[Any, ...]) -> dict[str, Any]:
    """The canonical fields :func:`compute` needs, from one :data:`_PENDING` row."""
    _, _, dialect, tool, category, subcategory, *texts = row
    record: dict[str, Any] = dict(zip(TEXT_FIELDS, texts, strict=True))
    sep2369 = {"category": category, "subcategory": subcategory} if category is not None else None
    return record | {"dialect": dialect, "tool": tool, "metadata": {"sep2369": sep2369} if sep2369 else None}


def score_new_records(
    warehouse: Warehouse, batch_size: int = 5_000, on_batch: Callable[[int], None] | None = None
) -> int:
    """Score every record without current signals; returns how many were scored."""
    scored = 0
    while batch := warehouse.con.execute(_PENDING, {"source": SOURCE, "limit": batch_size}).fetchall():
        signals = [compute(_record(row)) for row in batch]
        table = pa.table(
            {
                "collector": [row[0] for row in batch],
                "id": [row[1] for row in batch],
                "sentiment": [s.sentiment for s in signals],
                "specificity": [s.specificity for s in signals],
                "topics": [None if s.topics is None else list(s.topics) for s in signals],
                "expectation_gap": [s.expectation_gap for s in signals],
                "severity_language": [s.severity_language for s in signals],
            },
            schema=_SCORED,
        )
        with registered(warehouse.con, "scored", table):
            warehouse.con.execute(
                "INSERT OR REPLACE INTO record_signals SELECT *, ? AS source, ? AS computed_at FROM scored",
                [SOURCE, now_utc()],
            )
        scored += len(batch)
        if on_batch:
            on_batch(len(batch))
    return scored
