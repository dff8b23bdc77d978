"""A collector's pull API as a source: pages in commit order, the cursor kept per collector.

Each page is one batch; the warehouse stores it and moves the cursor in the same transaction,
so a pipeline killed between the two pulls the same page again (and stores nothing twice).
"""

from __future__ import annotations

from collections.abc import Iterator

from ...config import DEFAULT_BATCH_SIZE, HttpCollectorConfig
from .._raw import RawItem
from ._batch import Batch
from ._client import CollectorClient

CURSOR_KEY = "after"


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
                if not records:
                    return
                items = [RawItem(record, f"record {record.get('id')}") for record in records]
                after = page["next_cursor"]
                yield Batch(items, self.config.url, {CURSOR_KEY: after})
                if not page["has_more"]:
                    return
