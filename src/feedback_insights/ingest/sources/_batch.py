"""What a source yields: items, where they came from, and the cursor that covers them."""

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
