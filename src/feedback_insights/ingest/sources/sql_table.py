"""In-session feedback rows read from a SQLite or DuckDB file, in (ts, id) order.

The cursor is the last (ts, id) stored. A run starts a look-back window before it, because a
row can commit after a newer one (two writers, a slow transaction) with an older ``ts``: those
late rows are read, and the rows read again are recognised as already stored (identity is the
row id). Rows are read-only here; status write-back is the publishing stage's job.

Rows change after they are read: their owner triages, files or dismisses them. When the table
has an ``updated_at`` column, each run also reads the rows whose ``updated_at`` is after the
last one seen (less the same look-back), so a record's status follows its row. Its cost is one
query over ``updated_at`` per run (a scan, unless the table indexes it), returning only the
rows that changed in the window.

Rows deleted at the source are forgotten: each run ends with the table's ids (one column, in
pages), and the ingest runner erases the records of this source that are no longer among them.
A table that answers no ids at all, while records of it are stored, is taken for a wrong
configuration, not for a wholesale deletion: nothing is erased and the run says why.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from ...config import DEFAULT_BATCH_SIZE, SqlTableConfig
from .._raw import RawItem
from ._batch import Batch

CURSOR_KEY = "after"
#: The last ``updated_at`` seen (ISO text as the table writes it) and its row id.
UPDATED_KEY = "updated"


def is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


class SqlTable:
    kind = "sql"
    config_model = SqlTableConfig

    def __init__(self, config: SqlTableConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.name = config.name
        self.dialect = config.dialect
        self.service = config.service
        self.prevalidated = False
        self.path = config.path
        self.table = config.table
        self.lookback_ms = config.lookback_seconds * 1000
        self.batch_size = batch_size
        self.uri = f"{self.path}#{self.table}"

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        if not self.path.is_file():
            raise FileNotFoundError(f"source {self.name!r}: {self.path} does not exist")
        yield from self._new_rows(cursors)
        if "updated_at" in self._columns():
            yield from self._changed_rows(cursors)
        yield Batch([], self.uri, present=self._ids())

    def _new_rows(self, cursors: dict[str, str]) -> Iterator[Batch]:
        after = orjson.loads(cursors[CURSOR_KEY]) if CURSOR_KEY in cursors else None
        if after is not None:
            after = [after[0] - self.lookback_ms, ""]
        while rows := self._page("ts", after):
            after = [rows[-1]["ts"], rows[-1]["id"]]
            yield Batch(self._items(rows), self.uri, {CURSOR_KEY: _stored(after)})

    def _changed_rows(self, cursors: dict[str, str]) -> Iterator[Batch]:
        """Rows updated since the last run (less the look-back). The first run has just read
        every row, so it only notes where updates stand."""
        if UPDATED_KEY not in cursors:
            latest = self._query(f"SELECT max(updated_at) AS latest FROM {self.table}", [])[0]["latest"]
            if latest is not None:
                yield Batch([], self.uri, {UPDATED_KEY: orjson.dumps([str(latest), ""]).decode()})
            return
        seen, _ = orjson.loads(cursors[UPDATED_KEY])
        after: list[Any] | None = [_earlier(seen, self.lookback_ms), ""]
        while rows := self._page("updated_at", after):
            after = [str(rows[-1]["updated_at"]), rows[-1]["id"]]
            yield Batch(self._items(rows), self.uri, {UPDATED_KEY: _stored(after)})

    def _items(self, rows: list[dict[str, Any]]) -> list[RawItem]:
        # A NULL column is an absent field, as it would be in JSON.
        return [RawItem({k: v for k, v in row.items() if v is not None}, f"{self.table}.id={row['id']}") for row in rows]

    def _ids(self) -> list[str]:
        """Every row id now in the table, in pages of the batch size."""
        ids: list[str] = []
        while page := self._query(
            f"SELECT id FROM {self.table} WHERE id > ? ORDER BY id LIMIT ?", [ids[-1] if ids else "", self.batch_size]
        ):
            ids.extend(str(row["id"]) for row in page)
        return ids

    def _columns(self) -> set[str]:
        return set(self._run(f"SELECT * FROM {self.table} LIMIT 0", [])[0])

    def _page(self, order: str, after: list[Any] | None) -> list[dict[str, Any]]:
        where, params = "", [self.batch_size]
        if after is not None:
            where, params = f"WHERE ({order} > ? OR ({order} = ? AND id > ?))", [after[0], after[0], after[1], self.batch_size]
        # The table name is validated configuration; the order column is one of ours.
        return self._query(f"SELECT * FROM {self.table} {where} ORDER BY {order}, id LIMIT ?", params)

    def _query(self, query: str, params: list[Any]) -> list[dict[str, Any]]:
        names, rows = self._run(query, params)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _run(self, query: str, params: list[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        if is_sqlite(self.path):
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                cursor = con.execute(query, params)
                return [d[0] for d in cursor.description], cursor.fetchall()
            finally:
                con.close()
        import duckdb

        with duckdb.connect(str(self.path), read_only=True) as db:
            result = db.execute(query, params)
            return [d[0] for d in result.description], result.fetchall()


def _stored(position: list[Any]) -> str:
    """A (ts, id) position as the cursor keeps it: without the id. A run starts from the time
    alone (less the look-back) and recognises the rows it reads again, so the id is not needed
    there; and a row id can be what must not be stored (an email, an erased row's id)."""
    return orjson.dumps([position[0], ""]).decode()


def _earlier(moment: str, milliseconds: int) -> str:
    """``moment`` (ISO text, ``T`` or space) moved back, written the same way so that the
    table's text comparison still orders it."""
    parsed = datetime.fromisoformat(moment)
    shifted = parsed - timedelta(milliseconds=milliseconds)
    text = shifted.isoformat(sep="T" if "T" in moment else " ", timespec="seconds" if "." not in moment else "milliseconds")
    return text.replace("+00:00", "Z") if moment.endswith("Z") else text
