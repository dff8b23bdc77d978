"""The collector's own SQLite file (WAL: many readers, one writer at a time).

Records get a sequence number when they are committed, and so does the tombstone a deletion
leaves; SQLite has a single writer, so sequence order is commit order and a reader paging with
``seq > cursor`` never misses an entry that committed behind it, nor sees one twice.

A retry (the same service, session_id and content as an earlier report: what the warehouse calls
one) is a row of its own pointing at the first report (``duplicate_of``): retries are demand.

A record forwarded by a service keeps the hash of the ingest key that forwarded it (``owner``), so
that a service deletes only its own records; an agent's report has none, and only the pipeline
deletes it. A record id arrives once: sent again with the same content it is a duplicate, with
other content a :class:`Conflict`, never a silent drop.

A deleted record leaves nothing of itself in the file: ``secure_delete`` zeroes what SQLite frees,
and the write-ahead log, which still holds the pages as they were, is checkpointed and truncated,
after every deletion and whenever the store opens (a process killed in between left them there).

What the pipeline's key deleted (``forget``: an erasure at a person's request) is remembered in
the erasure ledger (``erased``), in the deletion's own transaction, so that a service or agent
sending it again does not put it back: keyed marks of each removed record's id and of its account
and content (see :meth:`Collector.erasure_marks`), never the values. A record carrying one is not
stored. What a service deleted with its own ingest key leaves no mark: a service that deletes its
own record may send it again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..ingest import content_hash

log = logging.getLogger("feedback_insights.collector")

#: ``PRAGMA user_version``: 0 a file from before retries were rows (or a new one); 1 its tables
#: upgraded, its retry keys not yet recomputed (:meth:`Store.rekey`); 2 current.
_KEYS_PENDING, _CURRENT = 1, 2

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS records (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        id           TEXT NOT NULL UNIQUE,
        received_at  TEXT NOT NULL,
        dedupe_key   TEXT,      -- same service, session_id and scrubbed content: a retry's key
        body         TEXT NOT NULL,
        duplicate_of TEXT,      -- a retry: the first report's id
        owner        TEXT       -- the hash of the ingest key that forwarded it; NULL: an agent's report
    )""",
    # One first report per key; its retries share the key.
    """CREATE UNIQUE INDEX IF NOT EXISTS records_first ON records (dedupe_key)
       WHERE dedupe_key IS NOT NULL AND duplicate_of IS NULL""",
    "CREATE INDEX IF NOT EXISTS records_retries ON records (duplicate_of) WHERE duplicate_of IS NOT NULL",
    # What a deletion leaves: an id and a time, in the same sequence as records.
    """CREATE TABLE IF NOT EXISTS tombstones (
        seq          INTEGER PRIMARY KEY,
        id           TEXT NOT NULL,
        deleted_at   TEXT NOT NULL
    )""",
    # The erasure ledger: keyed marks (HMAC-SHA256 hex) of what the pipeline erased.
    """CREATE TABLE IF NOT EXISTS erased (
        mark         TEXT PRIMARY KEY,
        kind         TEXT NOT NULL,   -- id, or content (an account's report's content)
        erased_at    TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS known_issues (
        id          TEXT PRIMARY KEY,
        body        TEXT NOT NULL,   -- the AFP known_issue object
        match       TEXT NOT NULL,   -- how records are matched to it
        updated_at  TEXT NOT NULL
    )""",
)
#: A file from before retries were rows: its retry keys included the account and the content
#: before scrubbing, and a key was unique to one row.
_UPGRADE = (
    "ALTER TABLE records ADD COLUMN duplicate_of TEXT",
    "DROP INDEX IF EXISTS records_dedupe",
)

#: Records and tombstones after a cursor, in commit order: one statement, so one snapshot.
_FEED = """
SELECT seq, id, duplicate_of, body, NULL FROM records WHERE seq > :after
UNION ALL
SELECT seq, id, NULL, NULL, deleted_at FROM tombstones WHERE seq > :after
ORDER BY seq LIMIT :limit
"""


class Conflict(Exception):
    """A record whose id is already stored with other content: the ``position`` in the batch, and
    the content hashes of the stored record and of this one. Nothing of the batch is stored."""

    def __init__(self, position: int, record_id: str, stored_hash: str, new_hash: str) -> None:
        super().__init__(f"{record_id} is stored with other content")
        self.position, self.record_id, self.stored_hash, self.new_hash = position, record_id, stored_hash, new_hash


#: A record to store: the record itself (scrubbed), and its retry key (None: it names no session).
Incoming = tuple[dict[str, Any], str | None]
#: A record's erasure marks, ``(kind, mark)``.
Marks = list[tuple[str, str]]


@dataclass(slots=True)
class Page:
    """Records (a retry with its ``duplicate_of``) and tombstones ``{id, deleted_at}``."""

    records: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[dict[str, str]] = field(default_factory=list)
    #: The sequence number of the last entry on the page (the cursor when it is empty).
    last: int = 0
    has_more: bool = False
    #: Ids this page holds as records, and ids it holds tombstones of.
    held: set[str] = field(default_factory=set, repr=False)
    gone: set[str] = field(default_factory=set, repr=False)

    def takes(self, record_id: str, duplicate_of: str | None) -> bool:
        """Whether a record can join the page: not when it depends on an entry already on it
        (a retry of a record here, a record whose id was deleted earlier here). Then a consumer
        that stores a page's records, then applies its tombstones, is always right, and it
        has stored a first report before it sees its retries."""
        return duplicate_of not in self.held and record_id not in self.gone

    def add_record(self, seq: int, record_id: str, duplicate_of: str | None, body: str) -> None:
        record = orjson.loads(body)
        if duplicate_of is not None:
            record["duplicate_of"] = duplicate_of
        self.records.append(record)
        self.held.add(record_id)
        self.last = seq

    def add_tombstone(self, seq: int, record_id: str, deleted_at: str) -> None:
        self.deleted.append({"id": record_id, "deleted_at": deleted_at})
        self.gone.add(record_id)
        self.last = seq


class Store:
    def __init__(self, path: Path | str) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
        self.con.execute("PRAGMA busy_timeout=5000")
        # Freed space is zeroed: a deleted record's text must not linger in free pages.
        self.con.execute("PRAGMA secure_delete=ON")
        self._lock = threading.RLock()
        self._migrate()
        # A checkpoint inside a request stalls every request behind it (up to ~10 ms); copy
        # the log into the database from a thread with its own connection instead.
        self.con.execute("PRAGMA wal_autocheckpoint=0")
        self._stop = threading.Event()
        self._purge = threading.Event()  # a deletion waits for the log to be truncated
        # A process killed after a deletion but before the log was truncated left the deleted
        # pages in the log, and nothing would ask to truncate it again: do so before serving.
        if self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            self._purge.set()  # another process reads the file: the checkpointer tries again
        self._checkpointer = threading.Thread(target=self._checkpoint_loop, args=(str(path),), daemon=True)
        if str(path) != ":memory:":
            self._checkpointer.start()

    # -- the file ---------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction, taken at once (BEGIN IMMEDIATE): what it reads cannot change
        before it commits, and its sequence numbers are taken in commit order."""
        with self._lock:
            self.con.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

    def _version(self) -> int:
        return int(self.con.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        """Create the tables, or upgrade a file from before retries were rows (its retry keys
        are recomputed by :meth:`rekey`, which needs the dialects)."""
        with self._transaction():
            exists = self.con.execute("SELECT 1 FROM sqlite_master WHERE name = 'records'").fetchone()
            version = self._version()
            if exists and version == 0:
                for statement in _UPGRADE:
                    self.con.execute(statement)
            for statement in _SCHEMA:
                self.con.execute(statement)
            if "owner" not in {row[1] for row in self.con.execute("PRAGMA table_info(records)")}:
                # Whose records a file from before owners were kept holds is unknown: the pipeline's.
                self.con.execute("ALTER TABLE records ADD COLUMN owner TEXT")
            if version == 0:
                self.con.execute(f"PRAGMA user_version = {_KEYS_PENDING if exists else _CURRENT}")

    def rekey(self, key_of: Callable[[dict[str, Any]], str | None]) -> None:
        """Once, for an upgraded file: every record's retry key computed the current way
        (``key_of`` its stored body), in commit order, so that a retry arriving after the
        upgrade is recognised as the warehouse will recognise it; a record whose key an earlier
        one already has becomes that one's retry (the warehouse ignores the account too)."""
        with self._transaction():
            if self._version() != _KEYS_PENDING:
                return
            self.con.execute("UPDATE records SET dedupe_key = NULL")
            after = 0
            while rows := self.con.execute(
                "SELECT seq, body FROM records WHERE seq > ? ORDER BY seq LIMIT 1000", [after]
            ).fetchall():
                for seq, body in rows:
                    key = key_of(orjson.loads(body))
                    self.con.execute("UPDATE records SET dedupe_key = ?, duplicate_of = ? WHERE seq = ?",
                                     [key, self._first_of(key), seq])
                after = rows[-1][0]
            self.con.execute(f"PRAGMA user_version = {_CURRENT}")

    def _checkpoint_loop(self, path: str, every: float = 1.0) -> None:
        """Runs until the store closes; a failed checkpoint is logged and tried again, because
        with automatic checkpoints off a dead loop would let the log grow without end.

        After a deletion the log is truncated too, or it would keep the deleted record's pages
        as they were. Without a busy timeout such a checkpoint never waits for a reader (and
        so never holds writers up): when one is in the way it is tried again a second later."""
        con = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            while not self._stop.wait(every):
                purge = self._purge.is_set()
                self._purge.clear()  # a deletion committed from now on asks again
                try:
                    busy = con.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if purge else 'PASSIVE'})").fetchone()[0]
                except sqlite3.Error:
                    log.exception("WAL checkpoint failed; retrying")
                    busy = 1
                if purge and busy:
                    self._purge.set()
        finally:
            con.close()

    def close(self) -> None:
        self._stop.set()
        if self._checkpointer.is_alive():
            self._checkpointer.join(timeout=5)
        self.con.close()

    # -- records ----------------------------------------------------------------------------

    def _first_of(self, key: str | None) -> str | None:
        """The id of the first report with this retry key, if there is one."""
        if key is None:
            return None
        row = self.con.execute(
            "SELECT id FROM records WHERE dedupe_key = ? AND duplicate_of IS NULL", [key]
        ).fetchone()
        return row[0] if row else None

    def add(self, record: dict[str, Any], dedupe_key: str | None) -> tuple[str, bool]:
        """Store an agent's report: :meth:`add_batch` of one, owned by no key."""
        answer = self.add_batch([(record, dedupe_key)], owner=None)[0]
        assert answer is not None  # no marks asked about
        return answer

    def add_batch(self, batch: list[Incoming], owner: str | None,
                  marks: Sequence[Marks] | None = None) -> list[tuple[str, bool] | None]:
        """Store records in one transaction, each ``owner``'s (an ingest key's hash); returns for
        each (the id to answer with, whether it is a new report), or None for one erased before
        (any of its ``marks``, one list per record, is in the ledger): it is not stored.

        A retry (``dedupe_key`` an earlier report's) is stored as its own row pointing at that
        report and answered with its id. A record whose id is already stored (or earlier in the
        batch) was delivered twice: with the same content nothing is stored and the answer is the
        id its first report has; with other content it is a :class:`Conflict` and nothing of the
        batch is stored."""
        answers: list[tuple[str, bool] | None] = []
        with self._transaction():
            for position, (record, dedupe_key) in enumerate(batch):
                row = self.con.execute("SELECT coalesce(duplicate_of, id), body FROM records WHERE id = ?",
                                       [record["id"]]).fetchone()
                if row:
                    stored_hash, new_hash = content_hash(orjson.loads(row[1])), content_hash(record)
                    if stored_hash != new_hash:
                        raise Conflict(position, record["id"], stored_hash, new_hash)
                    answers.append((row[0], False))
                    continue
                if marks is not None and self._erased(marks[position]):
                    answers.append(None)
                    continue
                first = self._first_of(dedupe_key)
                self.con.execute(
                    "INSERT INTO records (id, received_at, dedupe_key, duplicate_of, body, owner) VALUES (?, ?, ?, ?, ?, ?)",
                    [record["id"], record["received_at"], dedupe_key, first, orjson.dumps(record).decode(), owner],
                )
                answers.append((first, False) if first else (record["id"], True))
        return answers

    def _erased(self, marks: Marks) -> bool:
        if not marks:
            return False
        found = self.con.execute(f"SELECT 1 FROM erased WHERE mark IN ({', '.join('?' * len(marks))}) LIMIT 1",
                                 [mark for _, mark in marks]).fetchone()
        return found is not None

    def delete(self, record_id: str, now: str, by: str | None,
               marks_of: Callable[[dict[str, Any]], Marks] | None = None) -> list[str]:
        """Remove a record and those of its retries ``by`` may delete, leave a tombstone for each
        (a service's deletion: the pipeline must learn of it), and drop their ids from the known
        issues that list them; returns the ids removed (none: no such record, or not ``by``'s).

        ``by`` is the hash of an ingest key, which may delete only what it forwarded, or None for
        the pipeline, which may delete any record (``forget``). A retry another key forwarded
        stays: the earliest one left becomes the first report, and the others its retries.

        The pipeline's deletion is an erasure: with ``marks_of`` (a stored record's marks), the
        marks of every record removed go into the ledger in the same transaction."""
        mine = "id = :id OR (duplicate_of = :id AND (:by IS NULL OR owner = :by))"
        with self._transaction():
            row = self.con.execute("SELECT owner FROM records WHERE id = ?", [record_id]).fetchone()
            if row is None or (by is not None and row[0] != by):
                return []
            rows = self.con.execute(f"SELECT id, body FROM records WHERE {mine} ORDER BY seq",
                                    {"id": record_id, "by": by}).fetchall()
            removed = [gone for gone, _ in rows]
            if by is None and marks_of is not None:
                self.con.executemany("INSERT OR IGNORE INTO erased (mark, kind, erased_at) VALUES (?, ?, ?)",
                                     [(mark, kind, now) for _, body in rows for kind, mark in marks_of(orjson.loads(body))])
            self.con.execute(f"DELETE FROM records WHERE {mine}", {"id": record_id, "by": by})
            self._promote_first_retry(record_id)
            # The pipeline erased them itself: a tombstone would only keep their ids.
            for gone in removed if by is not None else ():
                self.con.execute("INSERT INTO tombstones (seq, id, deleted_at) VALUES (?, ?, ?)",
                                 [self._next_seq(), gone, now])
            self._unlist(set(removed))
        self._purge.set()
        return removed

    def _promote_first_retry(self, deleted_id: str) -> None:
        """The retries left of a deleted report: the earliest becomes the first report (its retry
        key now unique to it), the others point at it."""
        survivor = self.con.execute("SELECT id FROM records WHERE duplicate_of = ? ORDER BY seq LIMIT 1",
                                    [deleted_id]).fetchone()
        if survivor is None:
            return
        self.con.execute("UPDATE records SET duplicate_of = NULL WHERE id = ?", [survivor[0]])
        self.con.execute("UPDATE records SET duplicate_of = ? WHERE duplicate_of = ?", [survivor[0], deleted_id])

    def _next_seq(self) -> int:
        """The next number of the sequence records and tombstones share. Records take theirs
        from AUTOINCREMENT, which never goes below its counter in ``sqlite_sequence``; moving
        that counter on is how a tombstone takes the next number without a record ever
        taking it again."""
        counter = self.con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
        newest = self.con.execute("SELECT max(seq) FROM tombstones").fetchone()[0]
        seq = max(counter[0] if counter else 0, newest or 0) + 1
        if counter:
            self.con.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'records'", [seq])
        else:
            self.con.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('records', ?)", [seq])
        return seq

    def page(self, after: int, limit: int) -> Page:
        """Up to ``limit`` records and tombstones after ``after``, in commit order; a page ends
        early before an entry that depends on one already on it (see :meth:`Page.takes`)."""
        rows = self.con.execute(_FEED, {"after": after, "limit": limit + 1}).fetchall()
        page = Page(last=after)
        for n, (seq, record_id, duplicate_of, body, deleted_at) in enumerate(rows):
            if n == limit or (body is not None and not page.takes(record_id, duplicate_of)):
                page.has_more = True
                break
            if body is None:
                page.add_tombstone(seq, record_id, deleted_at)
            else:
                page.add_record(seq, record_id, duplicate_of, body)
        return page

    def count(self) -> int:
        return int(self.con.execute("SELECT count(*) FROM records").fetchone()[0])

    # -- known issues -----------------------------------------------------------------------

    def put_known_issue(self, issue: dict[str, Any], match: dict[str, Any], now: str) -> bool:
        """Insert or replace; returns whether it was new."""
        with self._transaction():
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

    def _unlist(self, record_ids: set[str]) -> None:
        """Drop deleted records' ids from every known issue's ``match.record_ids``."""
        for issue_id, text in self.con.execute("SELECT id, match FROM known_issues").fetchall():
            match = orjson.loads(text)
            listed = match.get("record_ids") or []
            kept = [i for i in listed if i not in record_ids]
            if len(kept) != len(listed):
                self.con.execute("UPDATE known_issues SET match = ? WHERE id = ?",
                                 [orjson.dumps({**match, "record_ids": kept}).decode(), issue_id])
