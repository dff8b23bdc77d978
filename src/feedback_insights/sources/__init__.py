"""Where reports come from. Every source is one small class with the same contract:

``batches(cursors)`` yields :class:`Batch` objects in order, starting after the position that
``cursors`` (this collector's stored cursor keys) records. The caller stores each batch and its
``cursor`` update in one transaction, strictly in order (it may read a few batches ahead while
earlier ones are processed): a crash repeats batches (which is idempotent), never skips one.

File drops, SQL tables and HTTP collectors all fit this: the cursor is a per-file progress key,
a (ts, id) position, or a collector's opaque page cursor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ..config import FileDropConfig, HttpCollectorConfig, SqlTableConfig
from ..processing import RawItem
from ..readers import LineBlock


@dataclass(slots=True)
class Batch:
    #: Raw items, or a block of unparsed JSON Lines (cheaper to hand to a worker process).
    items: list[RawItem] | LineBlock
    source_uri: str
    cursor: dict[str, str] = field(default_factory=dict)


class Source(Protocol):
    name: str
    dialect: str
    service: str | None
    #: Whether the items were validated upstream (by our collector, before it scrubbed them).
    prevalidated: bool

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]: ...


def open_source(config: FileDropConfig | SqlTableConfig | HttpCollectorConfig, batch_size: int = 10_000) -> Source:
    from .files import FileDrop
    from .http import HttpCollector
    from .sql_table import SqlTable

    if isinstance(config, FileDropConfig):
        return FileDrop(config, batch_size)
    if isinstance(config, HttpCollectorConfig):
        return HttpCollector(config, batch_size)
    return SqlTable(config, batch_size)
