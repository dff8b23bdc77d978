"""The erasure ledger: what was erased, as keyed HMACs, so that no source stores it again.

A source cannot be made to forget: a file drop keeps the line, an SQL table its row until its
owner deletes it, a collector may deliver the report again. So every store step asks the
ledger first, by two marks a report carries — its identity (collector + id) and its content
from its account (collector + account + content hash; the same short text from another account
is another person's report and is stored) — and a quarantine entry by its id.

The marks are HMAC-SHA256 with the pseudonymisation key, each kind over its own domain: they
cannot be reversed by trying every short id, as the plain hashes of the audit once could.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ._sql import registered

ID = "id"
CONTENT = "content"
QUARANTINE = "quarantine"
_DOMAIN = b"feedback-insights erased\0"

_ERASED = """
SELECT s.row FROM ledger_probe s JOIN erasure_ledger l ON l.mark = s.mark
"""


class Ledger:
    """Makes the marks of what is erased, records them, and finds them among new arrivals."""

    def __init__(self, key: str | bytes) -> None:
        if not key:
            raise ValueError("the erasure ledger needs the pseudonymisation key")
        self._key = key.encode() if isinstance(key, str) else key

    def __repr__(self) -> str:  # never show the key
        return "Ledger(<key>)"

    def mark(self, kind: str, *parts: str | None) -> str:
        message = _DOMAIN + kind.encode() + b"".join(
            b"\0" + (part or "").encode("utf-8", errors="surrogatepass") for part in parts)
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def record_marks(self, rows: Iterable[tuple[str, str, str | None, str | None]]) -> list[tuple[str, str]]:
        """``(kind, mark)`` of records given as ``(collector, id, account, content_hash)``."""
        marks: list[tuple[str, str]] = []
        for collector, record_id, account, digest in rows:
            marks.append((ID, self.mark(ID, collector, record_id)))
            if digest is not None:
                marks.append((CONTENT, self.mark(CONTENT, collector, account, digest)))
        return marks

    def remember(self, con: duckdb.DuckDBPyConnection, marks: Sequence[tuple[str, str]], erasure_id: int,
                 when: datetime) -> None:
        """Add ``marks`` to the ledger (inside the caller's erasure transaction)."""
        if not marks:
            return
        table = pa.table({"kind": [k for k, _ in marks], "mark": [m for _, m in marks]})
        with registered(con, "new_marks", table):
            con.execute("""INSERT INTO erasure_ledger
                           SELECT DISTINCT ON (mark) mark, kind, ?, ? FROM new_marks
                           ON CONFLICT (mark) DO NOTHING""", [erasure_id, when])

    def drop_erased_records(self, con: duckdb.DuckDBPyConnection, records: pa.Table) -> tuple[pa.Table, set[str]]:
        """``records`` (staged: ``collector``, ``id``, ``account``, ``content_hash``) less the
        ones erased before, and the id marks of those (a report read twice counts once)."""
        if records.num_rows == 0 or not _has_marks(con):
            return records, set()
        columns = [records.column(name).to_pylist() for name in ("collector", "id", "account", "content_hash")]
        ids = [self.mark(ID, collector, record_id) for collector, record_id, *_ in zip(*columns, strict=True)]
        contents = [self.mark(CONTENT, collector, account, digest) for collector, _, account, digest in zip(*columns, strict=True)]
        rows = list(range(len(ids)))
        return _without(con, records, rows + rows, ids + contents, ids)

    def drop_erased_quarantine(self, con: duckdb.DuckDBPyConnection, entries: pa.Table) -> tuple[pa.Table, set[str]]:
        """Quarantine entries (staged, with ``id``) less the ones erased before, and their marks."""
        if entries.num_rows == 0 or not _has_marks(con):
            return entries, set()
        marks = [self.mark(QUARANTINE, i) for i in entries.column("id").to_pylist()]
        return _without(con, entries, list(range(len(marks))), marks, marks)


def _has_marks(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT EXISTS (SELECT 1 FROM erasure_ledger)").fetchall()[0][0])


def _without(con: duckdb.DuckDBPyConnection, table: pa.Table, rows: list[int], marks: list[str],
             names: list[str]) -> tuple[pa.Table, set[str]]:
    """``table`` less the rows any of whose ``marks`` is in the ledger, and those rows' ``names``."""
    with registered(con, "ledger_probe", pa.table({"row": pa.array(rows, pa.int64()), "mark": marks})):
        erased = sorted({row for (row,) in con.execute(_ERASED).fetchall()})
    if not erased:
        return table, set()
    keep = pc.invert(pc.is_in(pa.array(range(table.num_rows), pa.int64()), value_set=pa.array(erased, pa.int64())))
    return table.filter(keep), {names[row] for row in erased}
