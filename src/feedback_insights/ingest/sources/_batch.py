"""What a source yields: items, where they came from, the cursor that covers them, and what
the source says is gone."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._raw import RawItem
from .._readers import LineBlock


@dataclass(slots=True)
class Batch:
    #: Raw items, or a block of unparsed JSON Lines (cheaper to hand to a worker process).
    items: list[RawItem] | LineBlock
    source_uri: str
    cursor: dict[str, str] = field(default_factory=dict)
    #: Ids the source deleted (a collector's tombstones): their records are forgotten.
    deleted: list[str] = field(default_factory=list)
    #: Every id the source holds now, when it can list them (an SQL table): the records of
    #: this source not among them were deleted there and are forgotten.
    present: list[str] | None = None
    #: When the items that carry no time of their own were received, if the source says
    #: (a file drop's ``received_at``); else they were received when the run read them.
    received_at: str | None = None
