"""Pull every configured source into the warehouse, batch by batch."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from .config import Config
from .processing import process
from .sources import Source, open_source
from .warehouse import BatchCounts, Warehouse, now_utc

#: Told about each stored batch: (source name, items in it).
OnBatch = Callable[[str, int], None]


@dataclass(slots=True)
class IngestSummary:
    run_id: int
    counts: BatchCounts
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        c = self.counts
        text = f"new {c.new} · already stored {c.already} · retries {c.retries} · quarantined {c.quarantined}"
        return text + (f" · {len(self.errors)} source(s) failed" if self.errors else "")


def ingest(config: Config, warehouse: Warehouse, on_batch: OnBatch | None = None) -> IngestSummary:
    """Ingest every source; a failing source is reported and does not stop the others."""
    run_id = warehouse.start_run()
    summary = IngestSummary(run_id, BatchCounts())
    # One writer thread stores batch N (DuckDB works without the GIL) while this thread reads
    # and validates batch N+1. Batches still commit one at a time, in order.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="warehouse-writer") as writer:
        for source_config in config.sources:
            source = open_source(source_config, config.ingest.batch_size)
            try:
                _ingest_source(source, config, warehouse, writer, run_id, summary, on_batch)
            except (OSError, ValueError) as exc:
                summary.errors.append(f"{source.name}: {exc}")
    warehouse.finish_run(run_id, summary.counts, "; ".join(summary.errors) or None)
    return summary


def _ingest_source(
    source: Source,
    config: Config,
    warehouse: Warehouse,
    writer: ThreadPoolExecutor,
    run_id: int,
    summary: IngestSummary,
    on_batch: OnBatch | None,
) -> None:
    pending: Future[BatchCounts] | None = None
    try:
        for batch in source.batches(warehouse.cursors(source.name)):
            processed = process(
                batch.items,
                collector=source.name,
                source_uri=batch.source_uri,
                received_at=now_utc().isoformat(),
                choice=source.dialect,
                service=source.service,
                max_bytes=config.ingest.max_bytes,
            )
            if pending is not None:
                summary.counts.add(pending.result())
            pending = writer.submit(
                warehouse.store_batch,
                processed,
                collector=source.name,
                source_uri=batch.source_uri,
                run_id=run_id,
                cursor=batch.cursor,
            )
            if on_batch:
                on_batch(source.name, len(batch.items))
    finally:
        if pending is not None:
            summary.counts.add(pending.result())
