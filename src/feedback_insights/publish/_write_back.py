"""Status write-back to in-session feedback: a filed report's row becomes ``filed`` with the
issue's URL (the seed's ``resolve_feedback``).

Two ways, by source. An SQL-table source with ``write_back = true`` (a self-hoster who owns the
table) is updated in place, only rows still ``open`` or ``triaged``: a row a person dismissed or
already filed elsewhere is left alone, which also makes a second run change nothing.

A platform source (``write_back``, on by default) goes through the platform, so that its
permission check and audit apply: ``PATCH /v1/feedback/:id`` or the MCP tool
``resolve_feedback``, whichever the source's ``transport`` is, with the token of the owner whose
listing the row came from. Only records still ``open`` or ``triaged`` in the warehouse, not
written with this issue's URL before. A refusal (401, or 403: the token has no write scope) is
one line per row, and the row is tried again next run; a row that answers 404 is gone from the
platform and is forgotten, as a deletion the listing found would be. Every write is recorded in
``write_backs``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

import duckdb

from ..config import Config, SqlTableConfig
from ..core import now_utc
from ..ingest import CollectorClient
from ..ingest.sources import (
    FeedbackApi,
    NotFound,
    PlatformConfig,
    PlatformError,
    PlatformOwner,
    Refused,
    open_api,
    owner_of,
)
from ..ingest.sources.sql_table import is_sqlite
from ..warehouse import Ledger, Warehouse, erase_records, transaction
from ._sinks import SinkResult

_FILED_RECORDS = """
SELECT d.id AS draft_id, m.id, d.issue_url
FROM drafts d
JOIN cluster_members m ON m.view = 'reports' AND m.cluster_id = d.cluster_id
WHERE d.status = 'filed' AND d.issue_url IS NOT NULL AND m.collector = $collector
ORDER BY m.id
"""


#: A platform source's filed records still to write: open or triaged, not written with this URL
#: yet, their id as the platform sent it (an id stored as a keyed hash cannot name its row).
_PLATFORM_FILED = """
SELECT DISTINCT d.id AS draft_id, r.id, d.issue_url, r.source_uri,
       json_extract_string(r.original, '$.id') IS NOT DISTINCT FROM r.id AS named
FROM drafts d
JOIN cluster_members m ON m.view = 'reports' AND m.cluster_id = d.cluster_id
JOIN records r ON r.collector = m.collector AND r.id = m.id
WHERE d.status = 'filed' AND d.issue_url IS NOT NULL AND m.collector = $collector
  AND r.status IN ('open', 'triaged')
  AND NOT EXISTS (SELECT 1 FROM write_backs w
                  WHERE w.collector = m.collector AND w.id = m.id AND w.issue_url = d.issue_url)
ORDER BY r.id, d.id
"""


def write_back(config: Config, warehouse: Warehouse, collectors: Mapping[str, CollectorClient] | None = None) -> SinkResult:
    """The ``write_back`` sink (it needs no collector client): every row written is audited in
    ``write_backs``."""
    result = SinkResult()
    for source in config.sources:
        if isinstance(source, PlatformConfig) and source.write_back:
            _through_platform(config, warehouse, source, result)
            continue
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


def _through_platform(config: Config, warehouse: Warehouse, source: PlatformConfig, result: SinkResult) -> None:
    """Resolve each filed row through the platform (module docstring)."""
    rows = warehouse.con.execute(_PLATFORM_FILED, {"collector": source.name}).fetchall()
    apis: dict[str, FeedbackApi] = {}
    gone: list[tuple[str, str]] = []
    try:
        for draft_id, row_id, url, source_uri, named in rows:
            where = f"write-back to {source.name}: row {row_id}"
            if not named:
                result.errors.append(f"{where}: its id was stored as a keyed hash, so it cannot be named to the platform")
                continue
            owner = owner_of(source, source_uri)
            try:
                answered = _resolve(source, [owner] if owner else source.owners, apis, row_id, url)
            except Refused as exc:
                result.errors.append(f"{where}: refused ({exc}); tried again next run")
                continue
            except PlatformError as exc:
                result.errors.append(f"{where}: {exc}; the rest wait for the next run")
                return
            except ValueError as exc:  # an owner's variable is not set
                result.errors.append(f"{where}: {exc}")
                continue
            if not answered:
                gone.append((source.name, row_id))
                continue
            warehouse.con.execute("INSERT INTO write_backs VALUES (?, ?, ?, ?, ?, ?)",
                                  [draft_id, source.name, row_id, "filed", url, now_utc()])
            result.sent += 1
    finally:
        for api in apis.values():
            api.close()
        if gone:
            erase_records(warehouse.con, sorted(set(gone)), f"source {source.name}", "deleted at the platform (404 on write-back)",
                          Ledger(config.privacy.key()))
            warehouse.rewrite()  # their words leave the file's bytes too


def _resolve(source: PlatformConfig, owners: list[PlatformOwner], apis: dict[str, FeedbackApi], row_id: str,
             url: str) -> bool:
    """Mark the row filed with the first owner that has it; False when every owner answers 404."""
    for owner in owners:
        if owner.token_env not in apis:
            apis[owner.token_env] = open_api(source, owner)
        try:
            apis[owner.token_env].resolve(row_id, "filed", url)
        except NotFound:
            continue
        return True
    return False
