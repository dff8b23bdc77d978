"""Taking turns on one warehouse file: DuckDB lets one process write it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
