"""Two shapes every stage's SQL takes: all-or-nothing writes, and Arrow tables lent to a query."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb


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


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, table: Any) -> Iterator[None]:
    """``table`` (Arrow, Polars, pandas) visible to SQL as ``name`` for the block, and gone
    after it even when the block raises (a leftover view would shadow the next one)."""
    con.register(name, table)
    try:
        yield
    finally:
        con.unregister(name)
