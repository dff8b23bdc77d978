"""Where reports come from. Every source is one small class with the same contract:

``batches(cursors)`` yields :class:`Batch` objects in order, starting after the position that
``cursors`` (this collector's stored cursor keys) records. The caller stores each batch and its
``cursor`` update in one transaction, strictly in order (it may read a few batches ahead while
earlier ones are processed): a crash repeats batches (which is idempotent), never skips one.

File drops, SQL tables, HTTP collectors and the in-session platform all fit this: the cursor is a
per-file progress key, a (ts, id) position, a collector's opaque page cursor, or the instances a
platform source has stored rows of.

A source's privacy travels with its rows: :func:`open_source` adds the ``private`` cursor key
(``true``/``false``, the section's ``private``) to its first batch, so it is stored in the same
transaction as the first rows and every later stage knows, from the warehouse alone, which
collectors' reports are owner-private (:func:`private_collectors`) — a draft refreshed from the
desk or a digest of an old week has no configuration at hand to ask.

A source class is a plugin (entry-point group ``feedback_insights.sources``, or
``SOURCES.register`` in code): its ``kind`` is the ``kind`` of a ``[[sources]]`` table, its
``config_model`` the section model that table is validated as, and it is built as
``Source(config, batch_size)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol, cast

import duckdb

from ...config import DEFAULT_BATCH_SIZE, SourceConfig
from ...core import SOURCES
from ._batch import Batch
from ._client import CollectorClient, CollectorError
from .platform import (
    FeedbackApi,
    NotFound,
    PlatformConfig,
    PlatformError,
    PlatformOwner,
    PlatformSource,
    Refused,
    open_api,
    owner_of,
)

__all__ = [
    "PRIVATE_KEY",
    "Batch",
    "CollectorClient",
    "CollectorError",
    "FeedbackApi",
    "NotFound",
    "PlatformConfig",
    "PlatformError",
    "PlatformOwner",
    "PlatformSource",
    "Refused",
    "Source",
    "open_api",
    "open_source",
    "owner_of",
    "private_collectors",
]

#: The cursor key a source's privacy is stored under (``true`` or ``false``).
PRIVATE_KEY = "private"


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
    """The registered source of ``config.kind``, configured, its batches declaring its privacy
    (module docstring)."""
    source: Source = SOURCES.get(config.kind)(config, batch_size)
    # The wrapper is the source as the runner reads it; only the plugin's class attributes
    # (kind, config_model) are not its own.
    return cast(Source, _Declared(source, config.private))


class _Declared:
    """A source whose every batch carries the ``private`` cursor key; one that has nothing new
    (a file drop read to its end) yields one empty batch with it, so that a changed declaration
    reaches the warehouse whether or not the source has new rows."""

    def __init__(self, source: Source, private: bool) -> None:
        self._source, self._private = source, private
        self.name, self.dialect, self.service = source.name, source.dialect, source.service
        self.prevalidated = source.prevalidated

    @property
    def uri(self) -> str:
        return f"source {self.name}"

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        declaration = {PRIVATE_KEY: "true" if self._private else "false"}
        declared = False
        for batch in self._source.batches(cursors):
            batch.cursor = {**batch.cursor, **declaration}
            declared = True
            yield batch
        if not declared:
            yield Batch([], self.uri, declaration)


def private_collectors(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The collectors whose sources were last declared private when they were read."""
    rows = con.execute("SELECT collector FROM source_cursors WHERE key = ? AND value = 'true'", [PRIVATE_KEY]).fetchall()
    return {row[0] for row in rows}
