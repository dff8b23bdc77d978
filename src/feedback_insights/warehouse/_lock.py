"""Taking turns on one warehouse file: DuckDB lets one process write it.

Whoever works on the warehouse holds ``<warehouse>.lock`` (an ``flock``, released by the kernel
if its process dies) and writes into it what it is, so that whoever waits can say what it is
waiting for: "the ingest flow (pid 4242, since 14:00:03 UTC)".
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import duckdb

from ._connection import Warehouse

#: How often a bounded wait tries again.
_POLL_SECONDS = 0.2


class WarehouseBusy(RuntimeError):
    """Another process kept the warehouse longer than the wait allowed; the message names it."""


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def exclusive(
    path: Path,
    holder: str = "another feedback-insights process",
    timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Wait until no other process of ours is working on this warehouse, then hold it.

    DuckDB lets one process write a file; flows that ``serve`` starts at the same minute
    (ingest and insights at :00) would otherwise fail on its lock instead of taking turns.
    ``holder`` says who holds it (for those who wait); ``timeout`` None waits as long as it
    takes (a flow), else :class:`WarehouseBusy` after that many seconds (a person's command);
    ``on_wait`` is told, once, who is being waited for.
    """
    import fcntl

    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a+") as handle:
        if not _try_lock(handle):
            who = current_holder(path)
            if on_wait is not None:
                on_wait(who)
            if timeout is None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            elif not _lock_within(handle, timeout):
                raise WarehouseBusy(f"{path} is still in use by {current_holder(path)} after {timeout:g} s; "
                                    "try again when it is done")
        _write(handle, f"{holder} (pid {os.getpid()}, since {datetime.now(UTC):%H:%M:%S} UTC)")
        try:
            yield
        finally:
            _write(handle, "")
            fcntl.flock(handle, fcntl.LOCK_UN)


def current_holder(path: Path) -> str:
    """Who holds the warehouse's lock, as it wrote itself down: the pid it gives must be alive
    (a holder that was killed leaves its line behind)."""
    try:
        text = lock_path(path).read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    pid = re.search(r"\(pid (\d+)", text)
    if not text or pid is None or not _alive(int(pid.group(1))):
        return "another process"
    return text


@contextmanager
def open_when_free(
    path: Path, holder: str, timeout: float, on_wait: Callable[[str], None] | None = None
) -> Iterator[Warehouse]:
    """The warehouse for a person's command: its turn after the running flow (:func:`exclusive`,
    bounded by ``timeout``), then the file itself, waited for too (within the same bound) when
    a process that does not take turns has it open, e.g. a notebook."""
    deadline = time.monotonic() + timeout
    told = False

    def tell(who: str) -> None:
        nonlocal told
        if on_wait is not None and not told:
            on_wait(who)
        told = True

    with exclusive(path, holder, timeout, tell):
        while True:
            try:
                warehouse = Warehouse(path)
                break
            except duckdb.IOException as exc:
                other = _duckdb_holder(str(exc))
                if other is None:
                    raise
                if time.monotonic() >= deadline:
                    raise WarehouseBusy(f"{path} is still open in {other} after {timeout:g} s; "
                                        "try again when it is done") from None
                tell(other)
                time.sleep(_POLL_SECONDS)
        with warehouse:
            yield warehouse


def _try_lock(handle: IO[str]) -> bool:
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _lock_within(handle: IO[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not _try_lock(handle):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_SECONDS)
    return True


def _write(handle: IO[str], text: str) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(text)
    handle.flush()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def _duckdb_holder(message: str) -> str | None:
    """The process DuckDB names in its lock error ("Conflicting lock is held in
    /usr/bin/python3 (PID 4242)"); None for any other error."""
    if "Could not set lock" not in message:
        return None
    found = re.search(r"held in (\S+) \(PID (\d+)\)", message)
    return f"{Path(found.group(1)).name} (pid {found.group(2)})" if found else "another process"
