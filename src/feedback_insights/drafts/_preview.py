"""``draft-preview``: a file of records drafted as if they were one cluster, with no warehouse.

The records go through the pipeline's own code (validation and normalisation, scrubbing, an
in-memory warehouse, the demand SQL, labelling, the templates and prompts), so a preview shows
exactly what the pipeline would draft for such a cluster.
"""

from __future__ import annotations

from pathlib import Path

from ..clusters import demand, describe
from ..config import SAMPLE_HMAC_KEY, Config
from ..core import now_utc, shared_schemas
from ..ingest import Processed, RawItem, content_hash, process, read_items, start_run, store_batch
from ..privacy import Pseudonymiser, scrub_json
from ..warehouse import Warehouse
from ._inputs import DraftInput, draft_input

_CANONICAL_KEYS = frozenset({"dialect", "collector", "lane", "category", "original"})


class PreviewError(ValueError):
    """An input record that cannot be drafted from; the message names the line and field."""


def _is_canonical(obj: object) -> bool:
    return isinstance(obj, dict) and _CANONICAL_KEYS <= obj.keys()


def read_records(path: Path, config: Config) -> Processed:
    """Canonical records (as ``normalise`` writes them) or records in any dialect, scrubbed."""
    raw: list[RawItem] = []
    processed = Processed()
    for item in read_items(path):
        item.parse()
        if item.parse_error:
            raise PreviewError(f"{path} {item.position}: {item.parse_error}")
        if not _is_canonical(item.obj):
            raw.append(item)
            continue
        problems = shared_schemas().check("canonical_record.schema.json", item.obj)
        if problems:
            raise PreviewError(f"{path} {item.position}: {problems[0]}")
        record, _ = scrub_json(item.obj)
        processed.records.append(record)
        processed.content_hashes.append(content_hash(record["original"]))
        processed.raw_texts.append(None)
    key = config.privacy.hmac_key.get_secret_value() if config.privacy.hmac_key else SAMPLE_HMAC_KEY
    dialects = process(
        raw, collector="preview", source_uri=str(path), received_at=now_utc().isoformat(),
        pseudonymise=Pseudonymiser(key), max_bytes=config.ingest.max_bytes,
    )
    if dialects.quarantined:
        first = dialects.quarantined[0]
        raise PreviewError(f"{path} {first.position}: {'; '.join(map(str, first.problems))}")
    processed.records.extend(dialects.records)
    processed.content_hashes.extend(dialects.content_hashes)
    processed.raw_texts.extend(dialects.raw_texts)
    if not processed.records:
        raise PreviewError(f"{path}: no records")
    return processed


def preview_input(records: Processed, warehouse: Warehouse) -> DraftInput:
    """``records`` stored in ``warehouse`` (an empty, in-memory one) as one problem cluster."""
    con = warehouse.con
    store_batch(warehouse, records, collector="preview", source_uri="preview", run_id=start_run(warehouse))
    now = now_utc()
    (cluster_id,) = con.execute(
        """INSERT INTO clusters (view, service, polarity, created_at, updated_at)
           SELECT 'reports', mode(service), 'problem', ?, ? FROM records RETURNING id""",
        [now, now],
    ).fetchall()[0]
    con.execute(
        "INSERT INTO cluster_members SELECT 'reports', collector, id, NULL, ?, 'preview', ? FROM records",
        [cluster_id, now],
    )
    describe(warehouse, "none", "reports", {cluster_id})
    return draft_input(warehouse, demand(warehouse).row(0, named=True))
