"""In-session feedback rows read from a SQLite or DuckDB file, in (ts, id) order.

The cursor is the last (ts, id) stored. A run starts a look-back window before it, because a
row can commit after a newer one (two writers, a slow transaction) with an older ``ts``: those
late rows are read, and the rows read again are recognised as already stored (identity is the
row id). Rows are read-only here; status write-back is the publishing stage's job.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...config import DEFAULT_BATCH_SIZE, SqlTableConfig
from .._raw import RawItem
from ._batch import Batch

CURSOR_KEY = "after"


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

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        if not self.path.is_file():
            raise FileNotFoundError(f"source {self.name!r}: {self.path} does not exist")
        after = orjson.loads(cursors[CURSOR_KEY]) if CURSOR_KEY in cursors else None
        if after is not None:
            after = [after[0] - self.lookback_ms, ""]
        uri = f"{self.path}#{self.table}"
        while rows := self._page(after):
            after = [rows[-1]["ts"], rows[-1]["id"]]
            # A NULL column is an absent field, as it would be in JSON.
            items = [
                RawItem({k: v for k, v in row.items() if v is not None}, f"{self.table}.id={row['id']}")
                for row in rows
            ]
            yield Batch(items, uri, {CURSOR_KEY: orjson.dumps(after).decode()})

    def _page(self, after: list[Any] | None) -> list[dict[str, Any]]:
        where, params = "", [self.batch_size]
        if after is not None:
            where, params = "WHERE (ts > ? OR (ts = ? AND id > ?))", [after[0], after[0], after[1], self.batch_size]
        query = f"SELECT * FROM {self.table} {where} ORDER BY ts, id LIMIT ?"  # table name is validated config
        if is_sqlite(self.path):
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                cursor = con.execute(query, params)
                names = [d[0] for d in cursor.description]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            finally:
                con.close()
        import duckdb

        with duckdb.connect(str(self.path), read_only=True) as db:
            result = db.execute(query, params)
            names = [d[0] for d in result.description]
            return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
