"""The collector's own SQLite file (WAL: many readers, one writer at a time).

Records get a sequence number when they are committed; SQLite has a single writer, so sequence
order is commit order and a reader paging with ``seq > cursor`` never misses a record that
committed behind it, nor sees one twice.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("feedback_insights.collector")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    received_at TEXT NOT NULL,
    dedupe_key  TEXT,      -- same service, account, session_id and content: an agent's retry
    body        TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS records_dedupe ON records (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS known_issues (
    id          TEXT PRIMARY KEY,
    body        TEXT NOT NULL,   -- the AFP known_issue object
    match       TEXT NOT NULL,   -- how records are matched to it
    updated_at  TEXT NOT NULL
);
"""


class Store:
    def __init__(self, path: Path | str) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
        self.con.execute("PRAGMA busy_timeout=5000")
        self.con.executescript(_SCHEMA)
        # A checkpoint inside a request stalls every request behind it (up to ~10 ms); copy
        # the log into the database from a thread with its own connection instead.
        self.con.execute("PRAGMA wal_autocheckpoint=0")
        self._stop = threading.Event()
        self._checkpointer = threading.Thread(target=self._checkpoint_loop, args=(str(path),), daemon=True)
        if str(path) != ":memory:":
            self._checkpointer.start()

    def _checkpoint_loop(self, path: str, every: float = 1.0) -> None:
        """Runs until the store closes; a failed checkpoint is logged and tried again, because
        with automatic checkpoints off a dead loop would let the log grow without end."""
        con = sqlite3.connect(path, isolation_level=None)
        try:
            while not self._stop.wait(every):
                try:
                    con.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:
                    log.exception("WAL checkpoint failed; retrying")
        finally:
            con.close()

    def close(self) -> None:
        self._stop.set()
        if self._checkpointer.is_alive():
            self._checkpointer.join(timeout=5)
        self.con.close()

    def add(self, record: dict[str, Any], dedupe_key: str | None) -> tuple[str, bool]:
        """Store a record; returns (id, created). A retry returns the first record's id."""
        if dedupe_key is not None:
            row = self.con.execute("SELECT id FROM records WHERE dedupe_key = ?", [dedupe_key]).fetchone()
            if row:
                return row[0], False
        try:
            self.con.execute(
                "INSERT INTO records (id, received_at, dedupe_key, body) VALUES (?, ?, ?, ?)",
                [record["id"], record["received_at"], dedupe_key, orjson.dumps(record).decode()],
            )
        except sqlite3.IntegrityError:
            row = self.con.execute(
                "SELECT id FROM records WHERE id = ? OR dedupe_key = ?", [record["id"], dedupe_key]
            ).fetchone()
            return (row[0] if row else record["id"]), False
        return record["id"], True

    def page(self, after: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        rows = self.con.execute(
            "SELECT seq, body FROM records WHERE seq > ? ORDER BY seq LIMIT ?", [after, limit]
        ).fetchall()
        last = rows[-1][0] if rows else after
        return [orjson.loads(body) for _, body in rows], last

    def has_more(self, after: int) -> bool:
        return self.con.execute("SELECT 1 FROM records WHERE seq > ? LIMIT 1", [after]).fetchone() is not None

    def count(self) -> int:
        return int(self.con.execute("SELECT count(*) FROM records").fetchone()[0])

    # -- known issues -----------------------------------------------------------------------

    def put_known_issue(self, issue: dict[str, Any], match: dict[str, Any], now: str) -> bool:
        """Insert or replace; returns whether it was new."""
        existed = self.con.execute("SELECT 1 FROM known_issues WHERE id = ?", [issue["id"]]).fetchone()
        self.con.execute(
            "INSERT OR REPLACE INTO known_issues VALUES (?, ?, ?, ?)",
            [issue["id"], orjson.dumps(issue).decode(), orjson.dumps(match).decode(), now],
        )
        return existed is None

    def known_issues(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        rows = self.con.execute("SELECT body, match FROM known_issues ORDER BY updated_at DESC, id").fetchall()
        return [(orjson.loads(body), orjson.loads(match)) for body, match in rows]

    def delete_known_issue(self, issue_id: str) -> bool:
        return self.con.execute("DELETE FROM known_issues WHERE id = ?", [issue_id]).rowcount > 0
