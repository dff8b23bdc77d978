"""known_issue entries for collectors: what the agents that hit a filed problem are told.

For every filed cluster, each collector that supplied its records gets the AFP known_issue
object (id, title, status, url, the maintainer's workaround) and how to recognise the problem
in new reports: the member record ids it holds; its meaning (the centroid of its reports'
vectors in the model that clustered them, its service, and ``[embedding] known_issue_similarity``:
``drafts/_meaning.py``), by which a collector running the same model recognises reports worded
any way; and fingerprints (service, tool, the cluster's key terms) for one that does not. A
delivery is re-sent only when what would be sent changes (a status, a workaround, new members) or when the last attempt failed.

A cluster holding owner-private reports sends nothing of their words: its title is the
cluster's neutral name (a title drafted before the source was declared private may quote one)
and its fingerprints only the key terms many of its reports use (:meth:`DraftInput.shown_terms`).

An entry a collector holds that would no longer be sent is withdrawn (``DELETE``): the issue
was closed as a duplicate of another (its cluster merged into the survivor's, whose entry now
lists the reports), or the collector's reports all left its cluster. Left in place, it would
tell agents about an issue nobody tracks any more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from ..config import Config, HttpCollectorConfig
from ..core import now_utc
from ..drafts import Meaning, cluster_meanings, draft_input
from ..ingest import CollectorClient, CollectorError
from ..ingest.sources import private_collectors
from ..warehouse import Warehouse
from ._sinks import SinkResult

#: Fingerprints need this many key terms: one word alone would match unrelated reports.
MIN_TERMS = 2
FINGERPRINT_TERMS = 3

_FILED = """
SELECT d.id AS draft_id, d.cluster_id, d.title, d.issue_url, d.workaround,
       coalesce(d.known_status, 'acknowledged') AS status, c.service, c.key_terms, c.top_tools
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE d.status = 'filed' AND d.superseded_by IS NULL
ORDER BY d.id
"""

#: Entries delivered (and not withdrawn since), with the cluster their id names.
_DELIVERED = """
SELECT k.draft_id, k.collector, d.cluster_id
FROM known_issue_deliveries k JOIN drafts d ON d.id = k.draft_id
WHERE k.delivered_at IS NOT NULL AND k.status IS DISTINCT FROM 'withdrawn'
ORDER BY k.draft_id, k.collector
"""

_MEMBERS = """
SELECT m.collector, list(m.id ORDER BY m.id) AS ids
FROM cluster_members m
WHERE m.view = 'reports' AND m.cluster_id = $cluster
GROUP BY m.collector
"""


def known_issue(filed: dict[str, Any], prefix: str) -> dict[str, Any]:
    issue = {"id": f"{prefix}{filed['cluster_id']}", "title": filed["title"], "status": filed["status"]}
    if filed["issue_url"]:
        issue["url"] = filed["issue_url"]
    if filed["workaround"]:
        issue["workaround"] = filed["workaround"]
    return issue


def fingerprints(filed: dict[str, Any]) -> list[dict[str, Any]]:
    terms = list(filed["key_terms"] or [])[:FINGERPRINT_TERMS]
    if len(terms) < MIN_TERMS:
        return []
    base: dict[str, Any] = {"terms": terms}
    if filed["service"]:
        base["service"] = filed["service"]
    tools = list(filed["top_tools"] or [])[:3]
    return [{**base, "tool": tool} for tool in tools] or [base]


def payloads(config: Config, warehouse: Warehouse) -> list[tuple[int, str, dict[str, Any], dict[str, Any]]]:
    """``(draft id, collector name, known_issue, match)`` for every filed cluster and every
    configured HTTP collector that supplied some of its records."""
    receiving = {s.name for s in config.sources if isinstance(s, HttpCollectorConfig) and s.known_issues}
    out = []
    filed_clusters = warehouse.con.sql(_FILED).pl()
    meanings = cluster_meanings(warehouse, filed_clusters["cluster_id"].to_list(),
                                config.embedding.known_issue_similarity)
    private = private_collectors(warehouse.con)
    for filed in filed_clusters.iter_rows(named=True):
        members = warehouse.con.execute(_MEMBERS, {"cluster": filed["cluster_id"]}).fetchall()
        if private & {collector for collector, _ in members}:
            inputs = draft_input(warehouse, {**filed, "label": None})
            filed = {**filed, "title": inputs.neutral_name, "key_terms": inputs.shown_terms()}
        issue = known_issue(filed, config.github.known_issue_prefix)
        match = match_rules(filed, meanings.get(filed["cluster_id"]))
        for collector, ids in members:
            if collector in receiving:
                out.append((filed["draft_id"], collector, issue, {"record_ids": ids, **match}))
    return out


def match_rules(filed: dict[str, Any], meaning: Meaning | None) -> dict[str, Any]:
    """How a collector recognises a filed cluster's new reports, but for the ids it holds: its
    meaning (none for a cluster with no vector) and its fingerprints."""
    rules: dict[str, Any] = {"fingerprints": fingerprints(filed)}
    if meaning is not None:
        rules["meaning"] = {**meaning.as_json(), "service": filed["service"]}
    return rules


def deliver_known_issues(config: Config, warehouse: Warehouse, collectors: Mapping[str, CollectorClient]) -> SinkResult:
    """The ``known_issues`` sink: PUT every changed known_issue to its collectors; failures
    are kept and retried next run."""
    result = SinkResult()
    delivered = {
        (draft_id, collector): (digest, error)
        for draft_id, collector, digest, error in warehouse.con.execute(
            "SELECT draft_id, collector, payload_sha256, error FROM known_issue_deliveries"
        ).fetchall()
    }
    current = payloads(config, warehouse)
    for draft_id, collector, issue, match in current:
        digest = hashlib.sha256(orjson.dumps([issue, match], option=orjson.OPT_SORT_KEYS)).hexdigest()
        if delivered.get((draft_id, collector)) == (digest, None):
            result.unchanged += 1
            continue
        try:
            collectors[collector].put_known_issue(issue, match)
        except (CollectorError, KeyError) as exc:
            message = str(exc) if isinstance(exc, CollectorError) else f"no client for collector {collector}"
            result.errors.append(f"known_issue {issue['id']} → {collector}: {message}")
            _record(warehouse, draft_id, collector, None, issue["status"], message)
            continue
        _record(warehouse, draft_id, collector, digest, issue["status"], None)
        result.sent += 1
    _withdraw(config, warehouse, collectors, {(c[0], c[1]) for c in current}, result)
    return result


def _withdraw(config: Config, warehouse: Warehouse, collectors: Mapping[str, CollectorClient],
              current: set[tuple[int, str]], result: SinkResult) -> None:
    """DELETE the entries collectors hold that are no longer sent; a failure is retried next run.
    A collector no longer configured is out of reach and left as it is."""
    for draft_id, collector, cluster_id in warehouse.con.execute(_DELIVERED).fetchall():
        if (draft_id, collector) in current or collector not in collectors:
            continue
        issue_id = f"{config.github.known_issue_prefix}{cluster_id}"
        try:
            collectors[collector].delete_known_issue(issue_id)
        except CollectorError as exc:
            result.errors.append(f"known_issue {issue_id} → {collector}: not withdrawn: {exc}")
            warehouse.con.execute("UPDATE known_issue_deliveries SET error = ? WHERE draft_id = ? AND collector = ?",
                                  [str(exc), draft_id, collector])
            continue
        warehouse.con.execute(
            """UPDATE known_issue_deliveries SET payload_sha256 = NULL, status = 'withdrawn', delivered_at = ?,
               error = NULL WHERE draft_id = ? AND collector = ?""", [now_utc(), draft_id, collector])
        result.withdrawn += 1


def _record(warehouse: Warehouse, draft_id: int, collector: str, digest: str | None, status: str, error: str | None) -> None:
    # A failure keeps the digest of the last success (NULL here), so the next run sends again.
    warehouse.con.execute(
        """INSERT INTO known_issue_deliveries VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (draft_id, collector) DO UPDATE SET
               payload_sha256 = coalesce(excluded.payload_sha256, known_issue_deliveries.payload_sha256),
               status = excluded.status, delivered_at = coalesce(excluded.delivered_at, known_issue_deliveries.delivered_at),
               error = excluded.error""",
        [draft_id, collector, digest, status, now_utc() if error is None else None, error],
    )
