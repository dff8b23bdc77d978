"""The signals stage: compute RFC-026 signals for every stored record that has none yet.

Reads the scrubbed text from the warehouse (so nothing unscrubbed is ever scored) and writes
``record_signals`` batch by batch; a re-run scores only records ingested since.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from ..core import TEXT_FIELDS, now_utc
from ..warehouse import Warehouse, registered
from ._heuristics import SOURCE, compute

_PENDING = f"""
SELECT r.collector, r.id, {", ".join(f"r.{name}" for name in TEXT_FIELDS)}
FROM records r ANTI JOIN record_signals s ON s.collector = r.collector AND s.id = r.id
ORDER BY r.received_at, r.collector, r.id
LIMIT ?
"""


def score_new_records(
    warehouse: Warehouse, batch_size: int = 5_000, on_batch: Callable[[int], None] | None = None
) -> int:
    """Score every record without signals; returns how many were scored."""
    scored = 0
    while batch := warehouse.con.execute(_PENDING, [batch_size]).fetchall():
        signals = [compute(dict(zip(TEXT_FIELDS, texts, strict=True))) for _, _, *texts in batch]
        table = pa.table(
            {
                "collector": [row[0] for row in batch],
                "id": [row[1] for row in batch],
                "sentiment": [s.sentiment for s in signals],
                "specificity": [s.specificity for s in signals],
                "topics": [list(s.topics) for s in signals],
                "expectation_gap": [s.expectation_gap for s in signals],
                "severity_language": [s.severity_language for s in signals],
            }
        )
        with registered(warehouse.con, "scored", table):
            warehouse.con.execute(
                "INSERT INTO record_signals SELECT *, ? AS source, ? AS computed_at FROM scored", [SOURCE, now_utc()]
            )
        scored += len(batch)
        if on_batch:
            on_batch(len(batch))
    return scored
