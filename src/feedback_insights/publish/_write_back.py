"""Status write-back to in-session feedback tables: a filed report's row becomes ``filed``
with the issue's URL (the seed's ``resolve_feedback``).

Only for SQL-table sources configured with ``write_back = true``, and only rows still ``open``
or ``triaged``: a row a person dismissed or already filed elsewhere is left alone, which also
makes a second run change nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

import duckdb

from ..config import Config, SqlTableConfig
from ..core import now_utc
from ..ingest import CollectorClient
from ..ingest.sources.sql_table import is_sqlite
from ..warehouse import Warehouse, transaction
from ._sinks import SinkResult

_FILED_RECORDS = """
SELECT d.id AS draft_id, m.id, d.issue_url
FROM drafts d
JOIN cluster_members m ON m.view = 'reports' AND m.cluster_id = d.cluster_id
WHERE d.status = 'filed' AND d.issue_url IS NOT NULL AND m.collector = $collector
ORDER BY m.id
"""


def write_back(config: Config, warehouse: Warehouse, collectors: Mapping[str, CollectorClient] | None = None) -> SinkResult:
    """The ``write_back`` sink (it needs no collector client): every row written is audited in
    ``write_backs``."""
    result = SinkResult()
    for source in config.sources:
        if not isinstance(source, SqlTableConfig) or not source.write_back:
            continue
        rows = warehouse.con.execute(_FILED_RECORDS, {"collector": source.name}).fetchall()
        if not rows:
            continue
        if not source.path.is_file():  # connecting would create an empty database
            result.errors.append(f"write-back to {source.path}#{source.table}: the file does not exist")
            continue
        try:
            written = set(_update(source, [(url, row_id) for _, row_id, url in rows]))
        except (sqlite3.Error, duckdb.Error, OSError) as exc:
            result.errors.append(f"write-back to {source.path}#{source.table}: {exc}")
            continue
        audit = [(draft_id, source.name, row_id, "filed", url, now_utc()) for draft_id, row_id, url in rows
                 if row_id in written]
        if audit:
            warehouse.con.executemany("INSERT INTO write_backs VALUES (?, ?, ?, ?, ?, ?)", audit)
        result.sent += len(written)
    return result


def _update(source: SqlTableConfig, updates: list[tuple[str, str]]) -> list[str]:
    """Mark the rows filed (and move their ``updated_at`` where the table has one); the ids of
    the rows changed."""
    if is_sqlite(source.path):
        con = sqlite3.connect(source.path, timeout=30)
        try:
            names = {row[1] for row in con.execute(f"PRAGMA table_info({source.table})")}
            with con:
                return [row[0] for url, row_id in updates
                        for row in con.execute(_sql(source, names, "datetime('now')"), [url, row_id]).fetchall()]
        finally:
            con.close()
    with duckdb.connect(str(source.path)) as db, transaction(db):
        names = {d[0] for d in db.execute(f"SELECT * FROM {source.table} LIMIT 0").description}
        now = "strftime(now(), '%Y-%m-%d %H:%M:%S')"
        return [row[0] for url, row_id in updates for row in db.execute(_sql(source, names, now), [url, row_id]).fetchall()]


def _sql(source: SqlTableConfig, columns: set[str], now: str) -> str:
    # The table name is validated configuration, never data; ``now`` is one of two SQL literals.
    moved = f", updated_at = {now}" if "updated_at" in columns else ""
    return (f"UPDATE {source.table} SET status = 'filed', issue_url = ?{moved} "
            "WHERE id = ? AND status IN ('open', 'triaged') RETURNING id")
