"""Erasing records from every table that holds them, in one transaction, with an audit entry.

What is erased: the records, their signals, status history, write-backs, maintainers' quotes
and cluster memberships, the embeddings of their texts (unless another record shares the text),
the quarantine entries that became them or stand for them, a cluster's medoid that was one of
them, and their ids and the names saved in corrections. What is marked for the stages to
finish: the clusters they were in (``stale``: re-described by the next clustering run, so no
label keeps a word of theirs) and the drafts that cite them (``stale``: redrafted, or their
filed issue's body replaced).
A record's retries (``duplicate_of`` it: the same report sent again) go with it. The audit
entry (``erasures``) holds who, when, why and how many, never an id or the content; the erasure
ledger (:mod:`._ledger`) keeps keyed marks of what went, so that no source stores it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import orjson
import pyarrow as pa

from ..core import now_utc
from ._ledger import QUARANTINE, Ledger
from ._sql import registered, transaction

_QUARANTINE = """
DELETE FROM quarantine q
WHERE q.id IN (SELECT unnest($entries))
   OR EXISTS (SELECT 1 FROM erased_keys k WHERE q.collector = k.collector
              AND (list_contains(CAST(coalesce(q.record_ids, '[]') AS VARCHAR[]), k.id)
                   OR q.position = 'record ' || k.id OR q.position LIKE '%.id=' || k.id))
RETURNING q.id
"""

# A retry is the same report sent again: it holds the same words.
_WITH_RETRIES = """
SELECT collector, id FROM erased_keys
UNION
SELECT r.collector, r.id FROM records r JOIN erased_keys k ON r.collector = k.collector AND r.duplicate_of = k.id
"""

_UNSHARED_TEXTS = """
SELECT DISTINCT m.text_sha256 FROM cluster_members m SEMI JOIN erased_keys k USING (collector, id)
WHERE m.text_sha256 IS NOT NULL AND m.text_sha256 NOT IN (
    SELECT text_sha256 FROM cluster_members m2 ANTI JOIN erased_keys k2 USING (collector, id)
    WHERE text_sha256 IS NOT NULL)
"""


_ACTION_RECORDS = """
UPDATE cluster_actions a SET records = to_json(list_filter(CAST(a.records AS VARCHAR[]), lambda r: NOT list_contains(k.keys, r)))
FROM (SELECT list(key) AS keys FROM erased_keys) k
WHERE a.records IS NOT NULL AND list_has_any(CAST(a.records AS VARCHAR[]), k.keys)
"""


@dataclass(slots=True)
class Erasure:
    records: int = 0
    quarantined: int = 0
    clusters: list[int] = field(default_factory=list)
    drafts: list[int] = field(default_factory=list)


def erase_records(
    con: duckdb.DuckDBPyConnection, keys: Sequence[tuple[str, str]], actor: str, reason: str | None,
    ledger: Ledger, quarantine: Sequence[str] = (),
) -> Erasure:
    """Erase the records ``keys`` (``(collector, id)``) and their retries everywhere, and the
    ``quarantine`` entries named; marks what the stages must redo and remembers it all in the
    ledger. Keys that name no stored record still erase what other tables hold for them."""
    result = Erasure()
    if not keys and not quarantine:
        return result
    named = pa.table({"collector": pa.array([c for c, _ in keys], pa.string()),
                      "id": pa.array([i for _, i in keys], pa.string())})
    with transaction(con):
        with registered(con, "erased_keys", named):
            keys = [(c, i) for c, i in con.execute(_WITH_RETRIES).fetchall()]
        _erase(con, keys, actor, reason, ledger, list(quarantine), result)
    return result


def _erase(con: duckdb.DuckDBPyConnection, keys: list[tuple[str, str]], actor: str, reason: str | None,
           ledger: Ledger, quarantine: list[str], result: Erasure) -> None:
    table = pa.table({"collector": pa.array([c for c, _ in keys], pa.string()),
                      "id": pa.array([i for _, i in keys], pa.string()),
                      "key": pa.array([f"{c}:{i}" for c, i in keys], pa.string())})
    with registered(con, "erased_keys", table):
        # A cluster whose medoid is erased is re-described like one that lost a member, whichever
        # view the medoid was chosen in; until then it has no medoid rather than an erased one.
        result.clusters = [row[0] for row in con.execute(
            """SELECT cluster_id FROM cluster_members SEMI JOIN erased_keys USING (collector, id)
               WHERE cluster_id IS NOT NULL
               UNION
               SELECT id FROM clusters c SEMI JOIN erased_keys k ON c.medoid_collector = k.collector AND c.medoid_id = k.id
               ORDER BY 1""").fetchall()]
        con.execute("""UPDATE clusters c SET medoid_collector = NULL, medoid_id = NULL FROM erased_keys k
                       WHERE c.medoid_collector = k.collector AND c.medoid_id = k.id""")
        texts = [row[0] for row in con.execute(_UNSHARED_TEXTS).fetchall()]
        if texts:
            con.execute("DELETE FROM embeddings WHERE text_sha256 IN (SELECT unnest(?))", [texts])
            # An LLM's problem statement paraphrases the report: it goes with the report's vector,
            # whether the report was last embedded with it or (a run or rebuild without statements)
            # as its bare text.
            con.execute("""DELETE FROM problem_statements
                           WHERE embedded_sha256 IN (SELECT unnest($1)) OR text_sha256 IN (SELECT unnest($1))""", [texts])
        for name in ("cluster_members", "record_signals", "record_status_history", "write_backs", "draft_quotes"):
            con.execute(f"DELETE FROM {name} t USING erased_keys k WHERE t.collector = k.collector AND t.id = k.id")
        entries = [row[0] for row in con.execute(_QUARANTINE, {"entries": quarantine}).fetchall()]
        result.quarantined = len(entries)
        known = {(c, i): (a, h) for c, i, a, h in con.execute(
            "DELETE FROM records r USING erased_keys k WHERE r.collector = k.collector AND r.id = k.id "
            "RETURNING r.collector, r.id, r.account, r.content_hash").fetchall()}
        result.records = len(known)
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
        # No table keeps an erased id: a draft's citations and a posted comment's quote lose it
        # (the draft is stale already; a comment whose quote is gone is rewritten by publishing).
        citing = con.execute("""UPDATE drafts SET stale = true, cited = list_filter(cited, lambda c: NOT list_contains(k.keys, c))
                                FROM (SELECT list(key) AS keys FROM erased_keys) k
                                WHERE list_has_any(cited, k.keys) RETURNING id""").fetchall()
        result.drafts = sorted({*result.drafts, *(row[0] for row in citing)})
        con.execute("""UPDATE update_comments u SET quoted_collector = NULL, quoted_id = NULL FROM erased_keys k
                       WHERE u.quoted_collector = k.collector AND u.quoted_id = k.id""")
        # A correction's record lists lose the erased ids (an undo then moves the others), and
        # the names it kept for an undo to restore go where the clusters' own names went.
        con.execute(_ACTION_RECORDS)
        if result.clusters:
            _forget_saved_names(con, result.clusters)
        now = now_utc()
        [(erasure_id,)] = con.execute(
            "INSERT INTO erasures (erased_at, actor, reason, records, quarantined, clusters, drafts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            [now, actor, reason, result.records, result.quarantined, len(result.clusters), len(result.drafts)],
        ).fetchall()
        marks = ledger.record_marks((c, i, *known.get((c, i), (None, None))) for c, i in keys)
        marks += [(QUARANTINE, ledger.mark(QUARANTINE, entry)) for entry in entries]
        ledger.remember(con, marks, erasure_id, now)


def _forget_saved_names(con: duckdb.DuckDBPyConnection, clusters: list[int]) -> None:
    """The names corrections saved for an undo, of the clusters an erasure touched, become null
    (an undo then names the cluster by the naming rule): a label is one report's words."""
    saved = con.execute(
        """SELECT id, before FROM cluster_actions WHERE json_exists(before, '$.label')
           AND (cluster_id IN (SELECT unnest($c)) OR other_id IN (SELECT unnest($c)))""", {"c": clusters}).fetchall()
    blanked = [[orjson.dumps({**orjson.loads(before), "label": None}).decode(), action_id] for action_id, before in saved]
    if blanked:
        con.executemany("UPDATE cluster_actions SET before = ? WHERE id = ?", blanked)
