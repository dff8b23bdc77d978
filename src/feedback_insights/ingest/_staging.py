"""Turn a processed batch into Arrow tables that DuckDB reads without Python.

This is the Python-heavy half of storing a batch, so it runs wherever the batch was
processed (a worker process during a large ingest); the warehouse only has to insert.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..core import FIELDS, JSON_FIELDS, jsontext
from ._normalise import Processed, Quarantined, process
from ._raw import RawItem

# large_string: pyarrow builds it from Python strings several times faster than string.
_STAGED_TYPES = {f: pa.large_string() for f in FIELDS} | {
    "rating": pa.int8(), "content_hash": pa.large_string(), "redactions": pa.large_string(), "row": pa.int64()
}
_QUARANTINE_COLUMNS = ("id", "collector", "source_uri", "position", "dialect", "raw", "problems", "occurrence")


def _json(value: Any) -> str | None:
    return None if value is None else jsontext.dumps(value).decode()


def records_table(processed: Processed) -> pa.Table:
    """The batch's records as Arrow columns, nested fields as JSON text."""
    records = processed.records
    columns: dict[str, list[Any]] = {}
    for name in FIELDS:
        if name == "original":
            columns[name] = [
                text if text is not None else _json(r["original"])
                for r, text in zip(records, processed.raw_texts, strict=True)
            ]
        elif name in JSON_FIELDS:
            columns[name] = [_json(r[name]) for r in records]  # type: ignore[literal-required]
        else:
            columns[name] = [r[name] for r in records]  # type: ignore[literal-required]
    columns["content_hash"] = processed.content_hashes
    columns["redactions"] = [_json(r.get("redactions")) for r in records]
    columns["row"] = list(range(len(records)))
    return pa.table({k: pa.array(v, type=_STAGED_TYPES[k]) for k, v in columns.items()})


def quarantine_table(entries: list[Quarantined]) -> pa.Table:
    values = {
        "id": [q.id for q in entries],
        "collector": [q.collector for q in entries],
        "source_uri": [q.source_uri for q in entries],
        "position": [q.position for q in entries],
        "dialect": [q.dialect for q in entries],
        "raw": [q.raw for q in entries],
        "problems": [_json([p.as_dict() for p in q.problems]) for q in entries],
        "occurrence": [q.occurrence for q in entries],
    }
    types = {k: pa.int64() if k == "occurrence" else pa.large_string() for k in _QUARANTINE_COLUMNS}
    return pa.table({k: pa.array(values[k], type=types[k]) for k in _QUARANTINE_COLUMNS})


@dataclass(slots=True)
class StagedBatch:
    """A processed batch as Arrow tables (``None`` when it has no rows of that kind)."""

    records: pa.Table | None
    quarantine: pa.Table | None

    @classmethod
    def of(cls, processed: Processed) -> StagedBatch:
        return cls(
            records_table(processed) if processed.records else None,
            quarantine_table(processed.quarantined) if processed.quarantined else None,
        )


def prepare(items: Iterable[RawItem], **options: Any) -> StagedBatch:
    """Process and stage one batch: the unit of work a worker process does.

    ``options`` are :func:`process`'s keyword arguments.
    """
    return StagedBatch.of(process(items, **options))
