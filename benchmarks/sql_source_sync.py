"""What keeping an in-session table in sync costs: the SQL source's re-read of changed rows and
its reconciliation pass over ids (rows deleted at the source are forgotten).

Builds an ``agent_feedback`` SQLite table of N rows (default 200,000), one a second (``ts`` and
``updated_at``; ``updated_at`` indexed, as a table that is synced should be), ingests it once, then times three more runs of the real
ingest path on it:

- nothing changed: what every scheduled run pays (the look-back window, the ``updated_at``
  query, the table's ids in pages and the anti-join against the stored records);
- 1 % of the rows dismissed: the changed rows re-read and their status history written;
- 1 % of the rows deleted: those records erased everywhere.

and, alone, the id pass (reading every id of the table in pages) and the anti-join.

Run by hand: ``python benchmarks/sql_source_sync.py [N]``.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from feedback_insights.config import Config, PrivacyConfig, SqlTableConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.ingest._runner import _missing_at_source
from feedback_insights.ingest.sources.sql_table import SqlTable
from feedback_insights.warehouse import Warehouse

COLUMNS = ("id TEXT PRIMARY KEY, ts INTEGER NOT NULL, user_id TEXT NOT NULL, instance_id TEXT NOT NULL, "
           "author TEXT NOT NULL, surface TEXT NOT NULL, sentiment TEXT, body TEXT NOT NULL, trace_id TEXT, "
           "status TEXT NOT NULL, issue_url TEXT, updated_at TEXT NOT NULL")


def build_table(path: Path, n: int) -> None:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE agent_feedback ({COLUMNS})")
    con.execute("CREATE INDEX agent_feedback_updated ON agent_feedback (updated_at)")
    con.execute(
        """WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < ?)
           INSERT INTO agent_feedback
           SELECT printf('row-%08d', i), 1790000000000 + i * 1000, printf('user-%05d', i % 5000),
                  printf('inst-%04d', i % 800), 'user', 'chat', CASE WHEN i % 3 = 0 THEN 'bad' END,
                  printf('The export of board %d stopped at page %d and the retry lost the cursor', i % 97, i % 13),
                  printf('trace-%08d', i), 'open', NULL, datetime(1790000000 + i, 'unixepoch')
           FROM seq""", [n])
    con.commit()
    con.close()


def change(path: Path, sql: str) -> None:
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()


def timed(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db, warehouse_path = Path(folder) / "app.sqlite", Path(folder) / "feedback.duckdb"
        build_table(db, n)
        source = SqlTableConfig(kind="sql", name="console", path=db, service="pags", lookback_seconds=600)
        config = Config(privacy=PrivacyConfig(hmac_key="benchmark-key-xxxxxxxxxxxxxxxxxx"),
                        warehouse=WarehouseConfig(path=warehouse_path), sources=[source])
        table = Table(title=f"SQL source sync, {n:,} rows")
        for column in ("run", "seconds", "rows/s of the table", "what changed"):
            table.add_column(column, justify="left" if column in ("run", "what changed") else "right")
        with Warehouse(warehouse_path) as wh:
            first, _ = timed(lambda: ingest(config, wh))
            table.add_row("first ingest", f"{first:.2f}", f"{n / first:,.0f}", f"{n:,} new")
            steady, run = timed(lambda: ingest(config, wh))
            table.add_row("nothing changed", f"{steady:.2f}", f"{n / steady:,.0f}", run.line())
            change(db, "UPDATE agent_feedback SET status = 'dismissed', updated_at = datetime('now') "
                       "WHERE CAST(substr(id, 5) AS INTEGER) % 100 = 1")
            dismissed, run = timed(lambda: ingest(config, wh))
            table.add_row("1 % dismissed", f"{dismissed:.2f}", f"{n / dismissed:,.0f}", run.line())
            change(db, "DELETE FROM agent_feedback WHERE CAST(substr(id, 5) AS INTEGER) % 100 = 2")
            deleted, run = timed(lambda: ingest(config, wh))
            table.add_row("1 % deleted", f"{deleted:.2f}", f"{n / deleted:,.0f}", run.line())
            ids_s, ids = timed(SqlTable(source)._ids)
            table.add_row("  of which: every id, in pages", f"{ids_s:.2f}", f"{n / ids_s:,.0f}", f"{len(ids):,} ids")
            join_s, missing = timed(lambda: _missing_at_source(wh, "console", ids))
            table.add_row("  of which: anti-join", f"{join_s:.2f}", f"{n / join_s:,.0f}", f"{len(missing)} missing")
        Console().print(table)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
