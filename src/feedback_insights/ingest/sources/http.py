"""A collector's pull API as a source: pages in commit order, the cursor kept per collector.

Each page is one batch: its records, and the ids of its tombstones as the batch's ``deleted``.
The runner stores the records, erases the deleted ones, and only then moves the cursor, so a
pipeline killed in between pulls the same page again (and stores nothing twice). The collector
ends a page before anything that must come after an entry on it (a retry of a record on the
page, a record whose id was deleted earlier on it), so this order is always the right one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...config import DEFAULT_BATCH_SIZE, HttpCollectorConfig
from .._raw import RawItem
from ._batch import Batch
from ._client import CollectorClient

CURSOR_KEY = "after"


def envelope(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the collector received it: ``duplicate_of`` is the feed's note on a retry,
    not a field of the envelope (whose schema has no room for it); the warehouse decides retries
    itself, by the same rule as the collector."""
    return {key: value for key, value in record.items() if key != "duplicate_of"}


class HttpCollector:
    kind = "http"
    config_model = HttpCollectorConfig

    def __init__(self, config: HttpCollectorConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.name = config.name
        self.dialect = config.dialect
        self.service = config.service
        self.prevalidated = True
        self.config = config
        self.page_size = min(config.page_size, batch_size)

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        after = cursors.get(CURSOR_KEY)
        with CollectorClient(self.config.url, self.config.key(), retries=self.config.retries) as client:
            while True:
                page = client.pull(after, self.page_size)
                records = page["records"]
                # A collector from before tombstones sends none.
                deleted = [tombstone["id"] for tombstone in page.get("deleted") or ()]
                if not records and not deleted:
                    return
                items = [RawItem(envelope(record), f"record {record.get('id')}") for record in records]
                after = page["next_cursor"]
                yield Batch(items, self.config.url, {CURSOR_KEY: after}, deleted=deleted)
                if not page["has_more"]:
                    return
