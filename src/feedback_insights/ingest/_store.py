"""Storing what ingestion produced: a batch of records and quarantine entries, the source
cursor that covers them, and the run they belong to.

A batch is stored in one transaction, so a crash leaves no partial batch and the cursor unmoved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
import polars as pl

from ..core import now_utc
from ..warehouse import Ledger, Warehouse, registered, transaction
from ._normalise import Processed
from ._staging import StagedBatch
from .sources import PRIVATE_KEY

# Decisions are made on a narrow projection (row number, identity, retry key) and joined back
# to the wide staged rows by row number: sorting whole records is what makes this slow.
_INSERT_RECORDS = """
INSERT INTO records
WITH keys AS (
    SELECT row, collector, id, service, session_id, content_hash,
           CAST(received_at AS TIMESTAMPTZ) AS received_ts
    FROM staged
), fresh AS (
    SELECT k.* FROM keys k
    ANTI JOIN records r ON r.collector = k.collector AND r.id = k.id
    QUALIFY row_number() OVER (PARTITION BY k.collector, k.id ORDER BY k.row) = 1
), earlier AS (
    SELECT r.service, r.session_id, r.content_hash, arg_min(r.id, r.received_at) AS first_id
    FROM records r
    SEMI JOIN fresh f ON f.session_id = r.session_id AND f.content_hash = r.content_hash
    WHERE r.duplicate_of IS NULL
    GROUP BY ALL
), decided AS (
    SELECT f.row, f.received_ts,
        CASE WHEN f.session_id IS NULL THEN NULL
             ELSE coalesce(e.first_id, CASE WHEN row_number() OVER retry > 1 THEN first_value(f.id) OVER retry END)
        END AS duplicate_of
    FROM fresh f
    LEFT JOIN earlier e
        ON e.service IS NOT DISTINCT FROM f.service
       AND e.session_id = f.session_id
       AND e.content_hash = f.content_hash
    WINDOW retry AS (PARTITION BY f.service, f.session_id, f.content_hash ORDER BY f.received_ts, f.id)
)
SELECT
    s.collector, s.id, s.dialect, s.service, s.account, d.received_ts, s.source, s.lane,
    s.category, s.outcome, s.severity, s.summary, s.goal, s.detail, s.tool, s.method,
    s.expected, s.actual, s.suggestion, s.workaround, s.rating, s.request_id, s.session_id,
    s.trace_id, s.message_id, s.agent, s.evidence, s.context, s.metadata, s.original,
    s.content_hash, d.duplicate_of, $source_uri, $run_id, $now, s.redactions, s.status, s.issue_url
FROM decided d JOIN staged s ON s.row = d.row
RETURNING collector, id, status, issue_url, coalesce(CAST(json_extract(redactions, '$.identifier') AS INTEGER), 0),
          duplicate_of
"""

# A report read again (an in-session row whose updated_at moved) brings its current status.
_UPDATE_STATUS = """
UPDATE records r SET status = s.status, issue_url = s.issue_url
FROM (SELECT collector, id, status, issue_url FROM staged WHERE status IS NOT NULL
      QUALIFY row_number() OVER (PARTITION BY collector, id ORDER BY row DESC) = 1) s
WHERE r.collector = s.collector AND r.id = s.id
  AND (r.status IS DISTINCT FROM s.status OR r.issue_url IS DISTINCT FROM s.issue_url)
RETURNING r.collector, r.id, r.status, r.issue_url
"""

_UPSERT_QUARANTINE = """
INSERT INTO quarantine (id, collector, source_uri, position, dialect, raw, problems,
                        first_seen, last_seen, run_id, occurrence)
SELECT id, collector, source_uri, position, dialect, raw, CAST(problems AS JSON), $now, $now, $run_id, occurrence
FROM staged_quarantine
ON CONFLICT (id) DO UPDATE SET
    problems = excluded.problems, last_seen = excluded.last_seen, run_id = excluded.run_id,
    position = excluded.position, source_uri = excluded.source_uri
"""


@dataclass(slots=True)
class BatchCounts:
    new: int = 0
    already: int = 0
    retries: int = 0
    quarantined: int = 0
    #: Stored reports whose source now reports another status or issue.
    status_changes: int = 0
    #: Ids of new records that carried personal data or a secret (stored as keyed hashes).
    identifiers: int = 0
    #: Reports (and quarantine entries) not stored because they were erased before, by their
    #: ledger marks: a report read twice in a run (an SQL row's look-back) counts once.
    erased: set[str] = field(default_factory=set)

    def add(self, other: BatchCounts) -> None:
        self.new += other.new
        self.already += other.already
        self.retries += other.retries
        self.quarantined += other.quarantined
        self.status_changes += other.status_changes
        self.identifiers += other.identifiers
        self.erased |= other.erased


def abort_unfinished(warehouse: Warehouse) -> list[int]:
    """Mark runs still ``running`` as ``aborted``: a process holding the warehouse to write (as
    the caller does: DuckDB has one writer) is the only one that can be running, so these were
    killed before they could say how they ended."""
    rows = warehouse.con.execute(
        """UPDATE ingest_runs SET status = 'aborted', finished_at = ?,
               error = 'the run was stopped before it finished (killed, or the machine went away)'
           WHERE status = 'running' RETURNING id""",
        [now_utc()],
    ).fetchall()
    return sorted(row[0] for row in rows)


def start_run(warehouse: Warehouse) -> int:
    row = warehouse.con.execute(
        "INSERT INTO ingest_runs (started_at, status) VALUES (?, 'running') RETURNING id", [now_utc()]
    ).fetchone()
    assert row is not None
    return int(row[0])


def finish_run(warehouse: Warehouse, run_id: int, counts: BatchCounts, error: str | None = None) -> None:
    warehouse.con.execute(
        """UPDATE ingest_runs SET finished_at = ?, status = ?, new = ?, already = ?, retries = ?,
           quarantined = ?, erased = ?, error = ? WHERE id = ?""",
        [now_utc(), "failed" if error else "ok", counts.new, counts.already, counts.retries,
         counts.quarantined, len(counts.erased), error, run_id],
    )


def cursors(warehouse: Warehouse, collector: str) -> dict[str, str]:
    """Where ``collector``'s source stands: its own cursor keys (the privacy it declared is
    stored beside them, and is no position of the source's)."""
    rows = warehouse.con.execute("SELECT key, value FROM source_cursors WHERE collector = ? AND key <> ?",
                                 [collector, PRIVATE_KEY]).fetchall()
    return dict(rows)


#: A status as it was seen: the columns of ``record_status_history`` before when and which run.
_SEEN = {"collector": pl.String, "id": pl.String, "status": pl.String, "issue_url": pl.String}


def store_batch(
    warehouse: Warehouse,
    batch: Processed | StagedBatch,
    *,
    collector: str,
    source_uri: str,
    run_id: int,
    cursor: dict[str, str] | None = None,
    ledger: Ledger | None = None,
) -> BatchCounts:
    """Store a batch and move the cursor, all or nothing. With the erasure ``ledger`` (every
    path from a source has one; a throwaway preview warehouse has none), reports erased before
    are left out and counted."""
    staged = batch if isinstance(batch, StagedBatch) else StagedBatch.of(batch)
    now = now_utc()
    counts = BatchCounts()
    con = warehouse.con
    with transaction(con):
        records, quarantine = staged.records, staged.quarantine
        if ledger is not None:
            if records is not None:
                records, counts.erased = ledger.drop_erased_records(con, records)
            if quarantine is not None:
                quarantine, erased = ledger.drop_erased_quarantine(con, quarantine)
                counts.erased |= erased
        counts.quarantined = quarantine.num_rows if quarantine is not None else 0
        if records is not None:
            with registered(con, "staged", records):
                stored = con.execute(
                    _INSERT_RECORDS, {"source_uri": source_uri, "run_id": run_id, "now": now}
                ).fetchall()
                changed = con.execute(_UPDATE_STATUS).fetchall()
            counts.new = len(stored)
            counts.already = records.num_rows - counts.new
            counts.retries = sum(1 for *_, duplicate_of in stored if duplicate_of is not None)
            counts.status_changes = len(changed)
            counts.identifiers = sum(identifiers for *_, identifiers, _ in stored)
            seen = [(c, i, status, url) for c, i, status, url, *_ in stored if status is not None] + changed
            if seen:
                frame = pl.DataFrame(seen, schema=_SEEN, orient="row")
                with registered(con, "seen_status", frame):
                    con.execute("INSERT INTO record_status_history SELECT *, ?, ? FROM seen_status", [now, run_id])
        if quarantine is not None:
            with registered(con, "staged_quarantine", quarantine):
                con.execute(_UPSERT_QUARANTINE, {"now": now, "run_id": run_id})
        for key, value in (cursor or {}).items():
            con.execute(
                """INSERT INTO source_cursors VALUES (?, ?, ?, ?)
                   ON CONFLICT (collector, key) DO UPDATE SET value = excluded.value,
                   updated_at = excluded.updated_at""",
                [collector, key, value, now],
            )
    return counts


def quarantine_entries(warehouse: Warehouse, include_replayed: bool = False) -> pl.DataFrame:
    where = "" if include_replayed else "WHERE status = 'open'"
    return warehouse.con.sql(
        f"""SELECT id, collector, source_uri, position, dialect, status, problems, raw,
                   first_seen, last_seen, coalesce(occurrence, 0) AS occurrence
            FROM quarantine {where} ORDER BY first_seen, source_uri, id"""
    ).pl()


def mark_replayed(warehouse: Warehouse, entry_id: str, record_ids: list[str]) -> None:
    warehouse.con.execute(
        "UPDATE quarantine SET status = 'replayed', replayed_at = ?, record_ids = ? WHERE id = ?",
        [now_utc(), orjson.dumps(record_ids).decode(), entry_id],
    )
