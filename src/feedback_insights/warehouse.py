"""The DuckDB warehouse: the one place state lives.

Schema changes are numbered SQL files in ``migrations/``, applied in order and recorded in
``schema_migrations``. A batch (records, quarantine entries and the source cursor that covers
them) is stored in one transaction, so a crash leaves no partial batch and the cursor unmoved.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

import duckdb
import orjson
import polars as pl

from .processing import Processed
from .staging import StagedBatch

_MIGRATIONS = importlib.resources.files("feedback_insights") / "migrations"

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
    s.content_hash, d.duplicate_of, $source_uri, $run_id, $now, s.redactions
FROM decided d JOIN staged s ON s.row = d.row
RETURNING duplicate_of
"""

_UPSERT_QUARANTINE = """
INSERT INTO quarantine (id, collector, source_uri, position, dialect, raw, problems,
                        first_seen, last_seen, run_id)
SELECT id, collector, source_uri, position, dialect, raw, CAST(problems AS JSON), $now, $now, $run_id
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

    def add(self, other: BatchCounts) -> None:
        self.new += other.new
        self.already += other.already
        self.retries += other.retries
        self.quarantined += other.quarantined


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Wait until no other process of ours is working on this warehouse, then hold it.

    DuckDB lets one process write a file; flows that ``serve`` starts at the same minute
    (ingest and insights at :00) would otherwise fail on its lock instead of taking turns.
    """
    import fcntl

    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def now_utc() -> datetime:
    return datetime.now(UTC)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All or nothing: commit when the block ends, roll back if it raises."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


class Warehouse:
    """A connection to the warehouse file, migrated on open."""

    def __init__(self, path: Path | str, read_only: bool = False) -> None:
        """``read_only``: for readers (a notebook) that must not hold the one writer's lock;
        the file must exist and be migrated already."""
        self.path = Path(path)
        if str(path) != ":memory:" and not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(path), read_only=read_only)
        # Weeks and days are cut in UTC whatever the host's time zone (date_trunc on a
        # TIMESTAMPTZ follows the session's zone).
        self.con.execute("SET TimeZone = 'UTC'")
        if read_only:
            return
        # DuckDB checkpoints (compresses and rewrites) every 16 MB of WAL by default, which
        # during a bulk ingest means many small rewrites. The WAL is durable on its own, so
        # checkpoint once per run instead (see :meth:`checkpoint`).
        self.con.execute("SET checkpoint_threshold = '1GB'")
        migrate(self.con)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def checkpoint(self) -> None:
        self.con.execute("CHECKPOINT")

    # -- runs -------------------------------------------------------------------------------

    def start_run(self) -> int:
        row = self.con.execute(
            "INSERT INTO ingest_runs (started_at, status) VALUES (?, 'running') RETURNING id", [now_utc()]
        ).fetchone()
        assert row is not None
        return int(row[0])

    def finish_run(self, run_id: int, counts: BatchCounts, error: str | None = None) -> None:
        self.con.execute(
            """UPDATE ingest_runs SET finished_at = ?, status = ?, new = ?, already = ?, retries = ?,
               quarantined = ?, error = ? WHERE id = ?""",
            [now_utc(), "failed" if error else "ok", counts.new, counts.already, counts.retries,
             counts.quarantined, error, run_id],
        )

    # -- cursors ----------------------------------------------------------------------------

    def cursors(self, collector: str) -> dict[str, str]:
        rows = self.con.execute("SELECT key, value FROM source_cursors WHERE collector = ?", [collector]).fetchall()
        return dict(rows)

    # -- storing ----------------------------------------------------------------------------

    def store_batch(
        self,
        batch: Processed | StagedBatch,
        *,
        collector: str,
        source_uri: str,
        run_id: int,
        cursor: dict[str, str] | None = None,
    ) -> BatchCounts:
        """Store a batch and move the cursor, all or nothing."""
        staged = batch if isinstance(batch, StagedBatch) else StagedBatch.of(batch)
        now = now_utc()
        counts = BatchCounts(quarantined=staged.quarantine.num_rows if staged.quarantine is not None else 0)
        con = self.con
        with transaction(con):
            if staged.records is not None:
                con.register("staged", staged.records)
                stored = con.execute(
                    _INSERT_RECORDS, {"source_uri": source_uri, "run_id": run_id, "now": now}
                ).fetchall()
                con.unregister("staged")
                counts.new = len(stored)
                counts.already = staged.records.num_rows - counts.new
                counts.retries = sum(1 for (duplicate_of,) in stored if duplicate_of is not None)
            if staged.quarantine is not None:
                con.register("staged_quarantine", staged.quarantine)
                con.execute(_UPSERT_QUARANTINE, {"now": now, "run_id": run_id})
                con.unregister("staged_quarantine")
            for key, value in (cursor or {}).items():
                con.execute(
                    """INSERT INTO source_cursors VALUES (?, ?, ?, ?)
                       ON CONFLICT (collector, key) DO UPDATE SET value = excluded.value,
                       updated_at = excluded.updated_at""",
                    [collector, key, value, now],
                )
        return counts

    # -- quarantine -------------------------------------------------------------------------

    def quarantine(self, include_replayed: bool = False) -> pl.DataFrame:
        where = "" if include_replayed else "WHERE status = 'open'"
        return self.con.sql(
            f"""SELECT id, collector, source_uri, position, dialect, status, problems, raw,
                       first_seen, last_seen FROM quarantine {where} ORDER BY first_seen, source_uri, id"""
        ).pl()

    def mark_replayed(self, entry_id: str, record_ids: list[str]) -> None:
        self.con.execute(
            "UPDATE quarantine SET status = 'replayed', replayed_at = ?, record_ids = ? WHERE id = ?",
            [now_utc(), orjson.dumps(record_ids).decode(), entry_id],
        )


def export_parquet(warehouse: Path, folder: Path) -> None:
    """Every table as Parquet in ``folder`` (with the schema and sequences), for shared storage
    or another machine; :func:`import_parquet` reads it back."""
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} is not empty: export into a new folder")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute(f"EXPORT DATABASE {_literal(folder)} (FORMAT parquet)")  # takes no parameters


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def import_parquet(folder: Path, warehouse: Path) -> None:
    """A new warehouse file from an :func:`export_parquet` folder."""
    if not (folder / "schema.sql").is_file():
        raise FileNotFoundError(f"{folder} holds no exported warehouse (schema.sql is missing)")
    if warehouse.exists():
        raise FileExistsError(f"{warehouse} exists: import into a new file")
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(warehouse)) as con:
        con.execute(f"IMPORT DATABASE {_literal(folder)}")


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations this file has not seen yet; returns their names."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMPTZ)"
    )
    done = {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}
    applied = []
    for script in sorted(_MIGRATIONS.iterdir(), key=lambda p: p.name):
        if not script.name.endswith(".sql"):
            continue
        version = int(script.name.split("_", 1)[0])
        if version in done:
            continue
        with transaction(con):
            con.execute(script.read_text(encoding="utf-8"))
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, script.name, now_utc()])
        applied.append(script.name)
    return applied
