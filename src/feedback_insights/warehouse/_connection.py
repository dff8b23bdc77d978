"""The DuckDB warehouse: the one place state lives.

A :class:`Warehouse` is a connection to the file, migrated on open; stages read and write it
in DuckDB SQL through ``warehouse.con``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

import duckdb

from ._migrations import migrate


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
