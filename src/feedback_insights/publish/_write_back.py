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
from ..ingest import CollectorClient
from ..ingest.sources.sql_table import is_sqlite
from ..warehouse import Warehouse, transaction
from ._sinks import SinkResult

_FILED_RECORDS = """
SELECT m.id, d.issue_url
FROM drafts d
JOIN cluster_members m ON m.view = 'reports' AND m.cluster_id = d.cluster_id
WHERE d.status = 'filed' AND d.issue_url IS NOT NULL AND m.collector = $collector
ORDER BY m.id
"""


def write_back(config: Config, warehouse: Warehouse, collectors: Mapping[str, CollectorClient] | None = None) -> SinkResult:
    """The ``write_back`` sink (it needs no collector client)."""
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
            result.sent += _update(source, [(url, row_id) for row_id, url in rows])
        except (sqlite3.Error, duckdb.Error, OSError) as exc:
            result.errors.append(f"write-back to {source.path}#{source.table}: {exc}")
    return result


def _update(source: SqlTableConfig, updates: list[tuple[str, str]]) -> int:
    # The table name is validated configuration, never data.
    sql = f"UPDATE {source.table} SET status = 'filed', issue_url = ? WHERE id = ? AND status IN ('open', 'triaged')"
    if is_sqlite(source.path):
        con = sqlite3.connect(source.path, timeout=30)
        try:
            with con:
                before = con.total_changes
                con.executemany(sql, updates)
                return con.total_changes - before
        finally:
            con.close()
    with duckdb.connect(str(source.path)) as db, transaction(db):
        return sum(len(db.execute(f"{sql} RETURNING 1", [url, row_id]).fetchall()) for url, row_id in updates)
