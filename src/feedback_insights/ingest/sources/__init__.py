"""Where reports come from. Every source is one small class with the same contract:

``batches(cursors)`` yields :class:`Batch` objects in order, starting after the position that
``cursors`` (this collector's stored cursor keys) records. The caller stores each batch and its
``cursor`` update in one transaction, strictly in order (it may read a few batches ahead while
earlier ones are processed): a crash repeats batches (which is idempotent), never skips one.

File drops, SQL tables and HTTP collectors all fit this: the cursor is a per-file progress key,
a (ts, id) position, or a collector's opaque page cursor.

A source class is a plugin (entry-point group ``feedback_insights.sources``, or
``SOURCES.register`` in code): its ``kind`` is the ``kind`` of a ``[[sources]]`` table, its
``config_model`` the section model that table is validated as, and it is built as
``Source(config, batch_size)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol

from ...config import DEFAULT_BATCH_SIZE, SourceConfig
from ...core import SOURCES
from ._batch import Batch
from ._client import CollectorClient, CollectorError

__all__ = ["Batch", "CollectorClient", "CollectorError", "Source", "open_source"]


class Source(Protocol):
    kind: ClassVar[str]
    config_model: ClassVar[type[SourceConfig]]
    name: str
    dialect: str
    service: str | None
    #: Whether the items were validated upstream (by our collector, before it scrubbed them).
    prevalidated: bool

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]: ...


def open_source(config: SourceConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> Source:
    """The registered source of ``config.kind``, configured."""
    source: Source = SOURCES.get(config.kind)(config, batch_size)
    return source
