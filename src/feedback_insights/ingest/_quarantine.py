"""Show quarantined reports and try them again after a fix (a mapping change, a config change).

Replay runs an entry's raw text through the same detect → validate → normalise path as
ingestion. An entry that now passes is stored and marked ``replayed`` with the ids it became;
one that still fails keeps its place with its current problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import Config
from ..core import now_utc
from ..privacy import Pseudonymiser
from ..warehouse import Warehouse
from ._normalise import process
from ._raw import RawItem
from ._store import BatchCounts, finish_run, mark_replayed, quarantine_entries, start_run, store_batch


@dataclass(slots=True)
class ReplayResult:
    replayed: list[str] = field(default_factory=list)
    still_invalid: list[str] = field(default_factory=list)
    counts: BatchCounts = field(default_factory=BatchCounts)


def replay(config: Config, warehouse: Warehouse, ids: list[str] | None = None) -> ReplayResult:
    services = {s.name: (s.service, s.dialect) for s in config.sources}
    entries = quarantine_entries(warehouse).to_dicts()
    if ids:
        unknown = set(ids) - {e["id"] for e in entries}
        if unknown:
            raise KeyError(f"no open quarantine entry with id {', '.join(sorted(unknown))}")
        entries = [e for e in entries if e["id"] in ids]
    pseudonymise = Pseudonymiser(config.privacy.key())
    result = ReplayResult()
    run_id = start_run(warehouse)
    for entry in entries:
        service, choice = services.get(entry["collector"], (None, "auto"))
        processed = process(
            [RawItem.line(entry["raw"].encode(), entry["position"])],
            collector=entry["collector"],
            source_uri=entry["source_uri"],
            received_at=now_utc().isoformat(),
            choice=choice,
            service=service,
            max_bytes=config.ingest.max_bytes,
            pseudonymise=pseudonymise,
        )
        result.counts.add(
            store_batch(warehouse, processed, collector=entry["collector"], source_uri=entry["source_uri"], run_id=run_id)
        )
        if processed.records:
            mark_replayed(warehouse, entry["id"], [r["id"] for r in processed.records])
            result.replayed.append(entry["id"])
        else:
            result.still_invalid.append(entry["id"])
    finish_run(warehouse, run_id, result.counts)
    return result
