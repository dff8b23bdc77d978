"""Pull every configured source into the warehouse, batch by batch.

Batches are processed (parse → detect → validate → normalise → stage as Arrow) in worker
processes when they are large, so both cores work; this process keeps reading and stores the
finished batches strictly in source order, each with its cursor, one transaction each.

A run killed half-way (SIGKILL, SIGTERM, a lost machine) leaves no partial batch, and its
workers die with it (they ask the kernel for a signal when their parent goes). Its
``ingest_runs`` row cannot say how it ended: the next run marks it ``aborted`` and says so.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb

from ..config import Config, ConfigError
from ..core import now_utc
from ..privacy import Pseudonymiser, scrub_text
from ..warehouse import Ledger, Warehouse, erase_records
from ._normalise import Processed
from ._raw import RawItem
from ._readers import LineBlock
from ._staging import StagedBatch, prepare
from ._store import BatchCounts, abort_unfinished, cursors, finish_run, start_run, store_batch
from .sources import Batch, CollectorError, Source, open_source

#: Told about each stored batch: (source name, items in it).
OnBatch = Callable[[str, int], None]

#: Below this many items a batch is processed in this process: a worker would cost more.
POOL_THRESHOLD = 2_000


@dataclass(slots=True)
class IngestSummary:
    run_id: int
    counts: BatchCounts
    errors: list[str] = field(default_factory=list)
    #: Earlier runs that never finished (killed), marked aborted by this one.
    aborted: list[int] = field(default_factory=list)
    #: Records forgotten because their source deleted them.
    forgotten: int = 0
    #: Records in the warehouse once the run is done (None until then).
    stored: int | None = None

    def line(self) -> str:
        """What the run did, in one line that reads right on a second run too: a source is read
        from where the last run stopped, so "read again" counts only what was read twice (an
        SQL table's look-back), beside everything the warehouse holds."""
        c = self.counts
        text = f"new {c.new}"
        if c.retries:
            text += f", {c.retries} of them duplicate{'s' if c.retries > 1 else ''} (a copy of a report already stored)"
        if c.already:
            text += f" · {c.already} read again, already stored"
        text += f" · quarantined {c.quarantined}"
        if c.quarantined:
            text += " (feedback-insights quarantine list)"
        if c.status_changes:
            text += f" · status changes {c.status_changes}"
        if c.identifiers:
            text += f" · {c.identifiers} ids held personal data or a secret (stored as keyed hashes)"
        if c.erased:
            text += f" · {len(c.erased)} erased report{'s' if len(c.erased) > 1 else ''} skipped"
        if self.forgotten:
            text += f" · forgotten {self.forgotten} (deleted at the source)"
        if self.aborted:
            runs = ", ".join(map(str, self.aborted))
            text += f" · earlier run{'s' if len(self.aborted) > 1 else ''} {runs} never finished: marked aborted"
        if self.stored is not None:
            text += f" · {self.stored} record{'' if self.stored == 1 else 's'} stored in all"
        return text + (f" · {len(self.errors)} source(s) failed" if self.errors else "")

    def fail(self, line: str) -> None:
        """Keep an error line, scrubbed: it is printed, logged and stored with the run, and an
        exception's text can carry what a source held (a URL with credentials, a token)."""
        self.errors.append(scrub_text(line)[0])


class Stager:
    """Runs :func:`prepare` inline, or in a pool of worker
    processes started on the first batch big enough to be worth it."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    @property
    def depth(self) -> int:
        """Batches to keep in flight so that no worker waits for this process."""
        return 2 * self.workers if self._pool else 0

    def submit(self, items: list[RawItem] | LineBlock, options: dict[str, Any]) -> Future[StagedBatch]:
        if self.workers and len(items) >= POOL_THRESHOLD:
            if self._pool is None:
                # spawn: a fork of this process would copy DuckDB's threads and locks, and
                # spawned workers are this process's own children, so they can die with it.
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=context, initializer=_worker_started, initargs=(os.getpid(),)
                )
            return self._pool.submit(prepare, items, **options)
        done: Future[StagedBatch] = Future()
        done.set_result(prepare(items, **options))
        return done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)


def ingest(config: Config, warehouse: Warehouse, on_batch: OnBatch | None = None) -> IngestSummary:
    """Ingest every source; a failing source is reported and does not stop the others. Reports
    erased before are not stored again (the erasure ledger); when a source deleted some, the
    warehouse file is rewritten at the end, so their text leaves the file's bytes too."""
    pseudonymise = Pseudonymiser(config.privacy.key())
    if not pseudonymise.made(warehouse):
        raise ConfigError(
            f"{config.origin}: {config.privacy.key_source()}: not the key the pseudonyms in {warehouse.path} were "
            "made with; nothing was stored (with another key every account would be counted anew, and erased "
            "reports would no longer be recognised): use that key, or another warehouse.path"
        )
    ledger = Ledger(config.privacy.key())
    aborted = abort_unfinished(warehouse)
    run_id = start_run(warehouse)
    summary = IngestSummary(run_id, BatchCounts(), aborted=aborted)
    stager = Stager(config.ingest.workers if config.ingest.workers is not None else os.cpu_count() or 1)
    try:
        with _gc_paused():
            for source_config in config.sources:
                source = open_source(source_config, config.ingest.batch_size)
                try:
                    _ingest_source(source, config, warehouse, stager, (pseudonymise, ledger), run_id, summary, on_batch)
                except (OSError, ValueError, CollectorError) as exc:
                    summary.fail(f"{source.name}: {exc}")
                except duckdb.Error as exc:
                    summary.fail(f"{source.name}: the warehouse refused a batch: {exc}")
    except BaseException as exc:
        summary.fail(f"run stopped: {type(exc).__name__}: {exc}")
        raise
    finally:
        stager.close()
        finish_run(warehouse, run_id, summary.counts, "; ".join(summary.errors) or None)
    if summary.forgotten:
        warehouse.rewrite()
    else:
        warehouse.checkpoint()
    [(summary.stored,)] = warehouse.con.execute("SELECT count(*) FROM records").fetchall()
    return summary


def _ingest_source(
    source: Source,
    config: Config,
    warehouse: Warehouse,
    stager: Stager,
    privacy: tuple[Pseudonymiser, Ledger],
    run_id: int,
    summary: IngestSummary,
    on_batch: OnBatch | None,
) -> None:
    pseudonymise, ledger = privacy
    # Its section (names are unique): which service a report that names none is about.
    by_tool = next(s.service_by_tool for s in config.sources if s.name == source.name)
    # (staged batch, where it came from, the cursor that covers it), oldest first.
    in_flight: deque[tuple[Future[StagedBatch], str, dict[str, str]]] = deque()

    def store_oldest() -> None:
        future, source_uri, cursor = in_flight.popleft()
        counts = store_batch(warehouse, future.result(), collector=source.name, source_uri=source_uri, run_id=run_id,
                             cursor=cursor, ledger=ledger)
        summary.counts.add(counts)
        if on_batch:
            on_batch(source.name, counts.new + counts.already + counts.quarantined)

    for batch in source.batches(cursors(warehouse, source.name)):
        deletes = bool(batch.deleted) or batch.present is not None
        options = {
            "collector": source.name,
            "source_uri": batch.source_uri,
            "received_at": batch.received_at or now_utc().isoformat(),
            "choice": source.dialect,
            "service": source.service,
            "service_by_tool": by_tool,
            "require_service": True,
            "max_bytes": config.ingest.max_bytes,
            "pseudonymise": pseudonymise,
            "prevalidated": source.prevalidated,
        }
        # A batch that deletes moves its cursor only once the deletions are done too.
        in_flight.append((stager.submit(batch.items, options), batch.source_uri, {} if deletes else batch.cursor))
        while len(in_flight) > stager.depth or (deletes and in_flight):
            store_oldest()
        if deletes:
            summary.forgotten += _forget_deleted(warehouse, privacy, source.name, batch, summary)
            store_batch(warehouse, Processed(), collector=source.name, source_uri=batch.source_uri, run_id=run_id,
                        cursor=batch.cursor)
    while in_flight:
        store_oldest()


def _forget_deleted(warehouse: Warehouse, privacy: tuple[Pseudonymiser, Ledger], collector: str, batch: Batch,
                    summary: IngestSummary) -> int:
    """Erase the records ``batch`` says its source no longer holds; returns how many."""
    pseudonymise, ledger = privacy
    keys = [(collector, record_id) for record_id in batch.deleted]
    if batch.present is not None:
        if batch.present:
            # An id that carried personal data or a secret is stored as its keyed hash.
            present = batch.present + [pseudonymise.identifier(record_id) for record_id in batch.present]
            keys += _missing_at_source(warehouse, collector, present)
        elif stored := warehouse.con.execute("SELECT count(*) FROM records WHERE collector = ?", [collector]).fetchall()[0][0]:
            summary.fail(f"{collector}: the source lists no rows while {stored} of its records are stored; "
                         "nothing was forgotten (a wrong path or table?). To forget them: feedback-insights forget")
    if not keys:
        return 0
    return erase_records(warehouse.con, keys, f"source {collector}", "deleted at the source", ledger).records


def _missing_at_source(warehouse: Warehouse, collector: str, present: list[str]) -> list[tuple[str, str]]:
    """The stored records of ``collector`` whose ids are not in ``present``: an anti-join."""
    import polars as pl

    warehouse.con.register("present_at_source", pl.DataFrame({"id": present}, schema={"id": pl.String}))
    try:
        rows = warehouse.con.execute(
            """SELECT r.collector, r.id FROM records r ANTI JOIN present_at_source USING (id)
               WHERE r.collector = ? ORDER BY r.id""", [collector]).fetchall()
    finally:
        warehouse.con.unregister("present_at_source")
    return [(c, i) for c, i in rows]


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Parsed reports are acyclic, so reference counting frees them; the cyclic collector
    would only rescan every live batch again and again (it costs a third of ingest time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _worker_started(parent: int) -> None:
    """In each worker: die with the parent (Linux's parent-death signal), and pause the cyclic
    garbage collector as the parent does (see :func:`_gc_paused`)."""
    gc.disable()
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
