"""The warehouse, opened per request and only for as long as the request takes.

The scheduled flows hold the warehouse's lock while they work, and DuckDB lets one process
have the file open. A request takes its turn the way a maintainer's command does
(:func:`~feedback_insights.warehouse.open_when_free`), waiting a short while; when the turn
does not come, the page says "busy, retrying" (:class:`Busy`) instead of failing.

That lock is between processes: the desk's own requests, threads of one process, first take
turns on :data:`_REQUESTS`, so that two reviewers' pages wait for each other (a page's work
takes milliseconds) and "busy" only ever means another process has the warehouse.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..warehouse import Warehouse, WarehouseBusy, current_holder, open_when_free

#: How the desk names itself in the lock file, for the flows that wait for it.
HOLDER = "the review desk"
#: One request of this process at a time has the warehouse (whichever desk it serves).
_REQUESTS = threading.Lock()
#: How long a request waits for the others of this desk: long, since each is short; bounded
#: so that one that never ends cannot hang every page behind it.
REQUESTS_WAIT = 60.0


class Busy(RuntimeError):
    """The warehouse is in use by a scheduled flow (or another process) right now."""


class Turns:
    """Requests take turns on one warehouse with each other and with the flows."""

    def __init__(self, path: Path, wait: float) -> None:
        self.path = path
        #: How long a request waits for its turn before it answers "busy".
        self.wait = wait

    @contextmanager
    def open(self) -> Iterator[Warehouse]:
        """The warehouse, held for this request; :class:`Busy` when it cannot be had in time."""
        if not _REQUESTS.acquire(timeout=REQUESTS_WAIT):
            raise Busy(f"in use by other requests of this desk for over {REQUESTS_WAIT:g} s")
        try:
            with open_when_free(self.path, HOLDER, self.wait) as warehouse:
                yield warehouse
        except WarehouseBusy:
            raise Busy(f"in use by {current_holder(self.path)}") from None
        finally:
            _REQUESTS.release()
