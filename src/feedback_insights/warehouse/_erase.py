"""Erasing records from every table that holds them, in one transaction, with an audit entry.

What is erased: the records, their signals, status history and cluster memberships, the
embeddings of their texts (unless another record shares the text), and the quarantine entries
that became them or stand for them. What is marked for the stages to finish: the clusters they
were in (``stale``: re-described by the next clustering run, so no label keeps a word of theirs)
and the drafts that cite them (``stale``: redrafted, or their filed issue's body replaced).
The audit entry (``erasures``) holds who, when, why and a sha256 of each id, never the content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from ..core import now_utc
from ._sql import registered, transaction

_QUARANTINE = """
DELETE FROM quarantine q USING erased_keys k
WHERE q.collector = k.collector
  AND (list_contains(CAST(coalesce(q.record_ids, '[]') AS VARCHAR[]), k.id)
       OR q.position = 'record ' || k.id OR q.position LIKE '%.id=' || k.id)
RETURNING q.id
"""

_UNSHARED_TEXTS = """
SELECT DISTINCT m.text_sha256 FROM cluster_members m SEMI JOIN erased_keys k USING (collector, id)
WHERE m.text_sha256 IS NOT NULL AND m.text_sha256 NOT IN (
    SELECT text_sha256 FROM cluster_members m2 ANTI JOIN erased_keys k2 USING (collector, id)
    WHERE text_sha256 IS NOT NULL)
"""


@dataclass(slots=True)
class Erasure:
    records: int = 0
    quarantined: int = 0
    clusters: list[int] = field(default_factory=list)
    drafts: list[int] = field(default_factory=list)


def key_sha256(collector: str, record_id: str) -> str:
    return hashlib.sha256(f"{collector}:{record_id}".encode("utf-8", errors="surrogatepass")).hexdigest()


def erase_records(
    con: duckdb.DuckDBPyConnection, keys: Sequence[tuple[str, str]], actor: str, reason: str | None
) -> Erasure:
    """Erase the records ``keys`` (``(collector, id)``) everywhere; marks what the stages must
    redo. Keys that name no stored record still erase what other tables hold for them."""
    result = Erasure()
    if not keys:
        return result
    table = pa.table({"collector": [c for c, _ in keys], "id": [i for _, i in keys],
                      "key": [f"{c}:{i}" for c, i in keys]})
    with transaction(con), registered(con, "erased_keys", table):
        result.clusters = [row[0] for row in con.execute(
            """SELECT DISTINCT cluster_id FROM cluster_members SEMI JOIN erased_keys USING (collector, id)
               WHERE cluster_id IS NOT NULL ORDER BY 1""").fetchall()]
        texts = [row[0] for row in con.execute(_UNSHARED_TEXTS).fetchall()]
        if texts:
            con.execute("DELETE FROM embeddings WHERE text_sha256 IN (SELECT unnest(?))", [texts])
            # An LLM's problem statement paraphrases the report: it goes with the report's vector,
            # whether the report was last embedded with it or (a run or rebuild without statements)
            # as its bare text.
            con.execute("""DELETE FROM problem_statements
                           WHERE embedded_sha256 IN (SELECT unnest($1)) OR text_sha256 IN (SELECT unnest($1))""", [texts])
        for name in ("cluster_members", "record_signals", "record_status_history"):
            con.execute(f"DELETE FROM {name} t USING erased_keys k WHERE t.collector = k.collector AND t.id = k.id")
        result.quarantined = len(con.execute(_QUARANTINE).fetchall())
        result.records = len(con.execute(
            "DELETE FROM records r USING erased_keys k WHERE r.collector = k.collector AND r.id = k.id RETURNING r.id"
        ).fetchall())
        if result.clusters:
            con.execute("UPDATE clusters SET stale = true WHERE id IN (SELECT unnest(?))", [result.clusters])
            # What an LLM said of these clusters may quote the erased reports: named again, reasons dropped.
            con.execute("DELETE FROM cluster_names WHERE cluster_id IN (SELECT unnest(?))", [result.clusters])
            con.execute(
                """UPDATE cluster_judgements SET reason = '(erased)', records = NULL
                   WHERE cluster_id IN (SELECT unnest($c)) OR other_id IN (SELECT unnest($c))""",
                {"c": result.clusters},
            )
            result.drafts = [row[0] for row in con.execute(
                """UPDATE drafts SET stale = true
                   WHERE cluster_id IN (SELECT unnest($clusters))
                     AND (cited IS NULL OR list_has_any(cited, (SELECT list(key) FROM erased_keys)))
                   RETURNING id""", {"clusters": result.clusters}).fetchall()]
            result.drafts.sort()
        con.execute(
            "INSERT INTO erasures (erased_at, actor, reason, id_sha256, records, quarantined, clusters, drafts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [now_utc(), actor, reason, sorted(key_sha256(c, i) for c, i in keys), result.records,
             result.quarantined, len(result.clusters), len(result.drafts)],
        )
    return result
