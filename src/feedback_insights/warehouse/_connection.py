"""The DuckDB warehouse: the one place state lives.

A :class:`Warehouse` is a connection to the file, migrated on open; stages read and write it
in DuckDB SQL through ``warehouse.con``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

import duckdb

from ._migrations import migrate

#: The name the rewritten copy is attached under while it is written.
_FRESH = "rewritten_copy"


class Warehouse:
    """A connection to the warehouse file, migrated on open."""

    def __init__(self, path: Path | str, read_only: bool = False) -> None:
        """``read_only``: for readers (a notebook) that must not hold the one writer's lock;
        the file must exist and be migrated already."""
        self.path = Path(path)
        self.read_only = read_only
        if str(path) != ":memory:" and not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = self._connect()
        if not read_only:
            migrate(self.con)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(str(self.path), read_only=self.read_only)
        # Weeks and days are cut in UTC whatever the host's time zone (date_trunc on a
        # TIMESTAMPTZ follows the session's zone).
        con.execute("SET TimeZone = 'UTC'")
        if not self.read_only:
            # DuckDB checkpoints (compresses and rewrites) every 16 MB of WAL by default, which
            # during a bulk ingest means many small rewrites. The WAL is durable on its own, so
            # checkpoint once per run instead (see :meth:`checkpoint`).
            con.execute("SET checkpoint_threshold = '1GB'")
        return con

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def checkpoint(self) -> None:
        self.con.execute("CHECKPOINT")

    def rewrite(self) -> None:
        """Copy every table, sequence and view into a fresh file and put it in this one's
        place, atomically; reconnects. Why: DuckDB leaves the blocks that deleted rows were in
        as they were (neither ``CHECKPOINT`` nor ``VACUUM`` clears them), so after an erasure
        the old file still holds the erased text; the copy holds only what is live. The caller
        holds the warehouse (the lock, and DuckDB's own: one writer), so nobody sees the swap
        half-done; a crash before the rename leaves the old file whole and a stray copy, which
        the next rewrite replaces."""
        if str(self.path) == ":memory:" or self.read_only:
            return
        fresh = self.path.with_name(self.path.name + ".rewrite")
        for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
            leftover.unlink(missing_ok=True)
        self.con.execute("CHECKPOINT")
        [(database,)] = self.con.execute("SELECT current_database()").fetchall()
        self.con.execute(f"ATTACH {_literal(str(fresh))} AS {_FRESH}")  # ATTACH takes no parameters
        try:
            self.con.execute(f"COPY FROM DATABASE {_identifier(database)} TO {_FRESH}")
            self.con.execute(f"CHECKPOINT {_FRESH}")  # all of it in the file: its WAL is not moved
        finally:
            self.con.execute(f"DETACH {_FRESH}")
        self.con.close()
        os.replace(fresh, self.path)
        self.path.with_name(self.path.name + ".wal").unlink(missing_ok=True)  # closed: checkpointed, empty
        _sync_folder(self.path.parent)
        self.con = self._connect()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sync_folder(folder: Path) -> None:
    """Make the rename durable: it is an entry in the folder."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
