"""Sinks: where a publish run tells the world about the issues it filed and their state.

A sink is a plugin (entry-point group ``feedback_insights.sinks``, or ``SINKS.register`` in
code): a function ``(config, warehouse, collectors) -> SinkResult`` called after every filing
and state sync, which must be safe to call again (a failure is retried on the next run).
``collectors`` are the open clients of the HTTP sources that take known issues, by source name.
The built-ins are ``known_issues`` (AFP known_issue entries to collectors) and ``write_back``
(filed in-session rows marked in their SQL tables).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..config import Config
from ..ingest import CollectorClient
from ..warehouse import Warehouse


@dataclass(slots=True)
class SinkResult:
    """What a sink did: deliveries made, deliveries it had no reason to repeat, entries it took
    back, and one line per failure."""

    sent: int = 0
    unchanged: int = 0
    withdrawn: int = 0
    errors: list[str] = field(default_factory=list)


class Sink(Protocol):
    def __call__(self, config: Config, warehouse: Warehouse, collectors: Mapping[str, CollectorClient]) -> SinkResult: ...
