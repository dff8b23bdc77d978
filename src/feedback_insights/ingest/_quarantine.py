"""Show quarantined reports and try them again after a fix (a mapping change, a config change).

Replay runs an entry's raw text through the same detect → validate → normalise path as
ingestion. An entry that now passes is stored and marked ``replayed`` with the ids it became;
one that still fails keeps its place with its current problems. An entry for a whole file that
could not be read (position ``file``) reads the file again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Config, FileDropConfig, SourceConfig
from ..core import now_utc
from ..privacy import Pseudonymiser
from ..warehouse import Ledger, Warehouse
from ._normalise import process
from ._raw import RawItem
from ._readers import UnreadableFile, read_blocks
from ._store import BatchCounts, finish_run, mark_replayed, quarantine_entries, start_run, store_batch
from .sources.files import DONE, WHOLE_FILE, file_digest, received_at, unreadable


@dataclass(slots=True)
class ReplayResult:
    replayed: list[str] = field(default_factory=list)
    still_invalid: list[str] = field(default_factory=list)
    counts: BatchCounts = field(default_factory=BatchCounts)


def replay(config: Config, warehouse: Warehouse, ids: list[str] | None = None) -> ReplayResult:
    sources = {s.name: s for s in config.sources}
    entries = quarantine_entries(warehouse).to_dicts()
    if ids:
        unknown = set(ids) - {e["id"] for e in entries}
        if unknown:
            raise KeyError(f"no open quarantine entry with id {', '.join(sorted(unknown))}")
        entries = [e for e in entries if e["id"] in ids]
    pseudonymise = Pseudonymiser(config.privacy.key())
    ledger = Ledger(config.privacy.key())
    result = ReplayResult()
    run_id = start_run(warehouse)
    for entry in entries:
        source = sources.get(entry["collector"])
        options = {
            "collector": entry["collector"],
            "source_uri": entry["source_uri"],
            "received_at": _received_at(source, entry["source_uri"]) or now_utc().isoformat(),
            "choice": source.dialect if source else "auto",
            "service": source.service if source else None,
            "service_by_tool": source.service_by_tool if source else None,
            "require_service": True,
            "max_bytes": config.ingest.max_bytes,
            "pseudonymise": pseudonymise,
        }
        record_ids: list[str] = []
        # A report is resolved by becoming a record; a file by being read to its end (its bad
        # lines, if any, are entries of their own now), which is when its cursor moves.
        resolved = False
        for items, cursor in _deliveries(entry, config.ingest.batch_size):
            processed = process(items, **options)
            counts = store_batch(warehouse, processed, collector=entry["collector"], source_uri=entry["source_uri"],
                                 run_id=run_id, cursor=cursor, ledger=ledger)
            result.counts.add(counts)
            record_ids.extend(r["id"] for r in processed.records)
            resolved = bool(cursor) if entry["position"] == WHOLE_FILE else bool(processed.records)
        if resolved:
            mark_replayed(warehouse, entry["id"], record_ids)
            result.replayed.append(entry["id"])
        else:
            result.still_invalid.append(entry["id"])
    finish_run(warehouse, run_id, result.counts)
    return result


def _received_at(source: SourceConfig | None, source_uri: str) -> str | None:
    """The time a replayed report without one of its own gets: its file's, by the same rule as
    when it was first read (a file since replaced counts from its new version)."""
    if not isinstance(source, FileDropConfig):
        return None
    try:
        return received_at(source, Path(source_uri))
    except OSError:  # the file is gone: what is replayed is the text the entry kept
        return None


def _deliveries(entry: dict[str, Any], batch_size: int) -> Iterator[tuple[Iterable[RawItem], dict[str, str]]]:
    """What an entry stands for, as (items, cursor) batches: the one report it kept, or the
    whole file again (its cursor moved to done once every block is stored)."""
    if entry["position"] != WHOLE_FILE:
        yield [RawItem.line(entry["raw"].encode(), entry["position"], entry["occurrence"])], {}
        return
    path = Path(entry["source_uri"])
    try:
        key = f"file:{file_digest(path)}"
        for block in read_blocks(path, batch_size):
            yield block, {}
    except (OSError, UnreadableFile) as exc:
        batch = unreadable(path, exc, {})
        yield batch.items, {}
        return
    yield [], {key: DONE}
