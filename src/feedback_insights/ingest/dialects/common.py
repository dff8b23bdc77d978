"""What every dialect module shares: the receiving side's facts about a report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Origin:
    """What the receiving side knows about a report beyond its body.

    ``received_at`` is for reports that carry no time of their own. ``service`` is the service
    the receiver knows a report is about (our collector's own); ingestion leaves it unset and
    gives the records that name none their source's service afterwards (by tool, then the
    default: see :func:`feedback_insights.ingest.process`). ``digest`` is the content hash of
    the report and ``occurrence`` how many identical copies came before it in
    the same delivery (see ``RawItem.occurrence``), from which :attr:`fallback_id` is made.
    """

    collector: str
    received_at: str
    digest: str = ""
    occurrence: int = 0
    service: str | None = None

    @property
    def fallback_id(self) -> str:
        """Id for a report whose dialect carries none: stable for the same content from the
        same collector; the n-th identical copy within one delivery is a retry and gets ``-n``.
        Computed only when a dialect asks for it."""
        base = "fi_" + hashlib.sha256(f"{self.collector}\0{self.digest}".encode()).hexdigest()[:24]
        return base if self.occurrence == 0 else f"{base}-{self.occurrence}"
