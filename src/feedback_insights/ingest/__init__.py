"""The ingest stage: every configured source into the warehouse, scrubbed and pseudonymised.

raw items (:mod:`.sources`, file readers) → detect the dialect → validate → normalise to the
canonical record (:mod:`.dialects`) → scrub and pseudonymise → stage as Arrow → store with the
source's cursor, one transaction per batch. Invalid reports are quarantined (scrubbed too) and
can be replayed after a fix.
"""

from . import dialects
from ._envelope import is_enveloped
from ._normalise import Checked, Processed, Quarantined, check, content_hash, process, utc_timestamp
from ._quarantine import ReplayResult, replay
from ._raw import PENDING, UNPARSED, RawItem
from ._readers import LineBlock, UnreadableFile, read_blocks, read_items
from ._runner import IngestSummary, ingest
from ._staging import StagedBatch, prepare
from ._store import BatchCounts, cursors, quarantine_entries, start_run, store_batch
from .dialects import Origin
from .sources import Batch, CollectorClient, CollectorError, Source, open_source

#: What ingest writes: the reports, what failed validation, each run's counts, where each source
#: stopped, and every status an in-session row has had.
TABLES = frozenset({"records", "quarantine", "ingest_runs", "source_cursors", "record_status_history"})

__all__ = [
    "TABLES",
    "PENDING",
    "UNPARSED",
    "Batch",
    "BatchCounts",
    "Checked",
    "CollectorClient",
    "CollectorError",
    "IngestSummary",
    "LineBlock",
    "Origin",
    "Processed",
    "Quarantined",
    "RawItem",
    "ReplayResult",
    "Source",
    "StagedBatch",
    "UnreadableFile",
    "check",
    "content_hash",
    "cursors",
    "dialects",
    "ingest",
    "is_enveloped",
    "open_source",
    "prepare",
    "process",
    "quarantine_entries",
    "read_blocks",
    "read_items",
    "replay",
    "start_run",
    "store_batch",
    "utc_timestamp",
]
