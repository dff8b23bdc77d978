"""Maintainers' corrections to the clustering: merge, split, ignore.

Each is one transaction that also writes a ``cluster_actions`` row (who, when, why). Later runs
respect them without remembering rules: runs never move a record that is in a cluster, a
merged cluster is no longer offered to new records (its members now sit in the cluster it was
merged into), and an ignored cluster still absorbs new reports of its problem, so they do not
surface again as a new cluster.
"""

from __future__ import annotations

import getpass
import os

import orjson
from duckdb import DuckDBPyConnection

from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._embedding import MiniLMEmbedder
from ._stage import describe

ENV_ACTOR = "FEEDBACK_INSIGHTS_USER"


class CorrectionError(ValueError):
    """A correction that cannot be applied; the message says why."""


def default_actor() -> str:
    """Who is acting: ``$FEEDBACK_INSIGHTS_USER``, else the login name."""
    return os.environ.get(ENV_ACTOR) or getpass.getuser()


def _cluster(warehouse: Warehouse, cluster_id: int) -> dict:
    rows = warehouse.con.execute(
        "SELECT id, view, service, polarity, status, merged_into FROM clusters WHERE id = ?", [cluster_id]
    ).fetchall()
    if not rows:
        raise CorrectionError(f"no cluster {cluster_id}")
    found = dict(zip(("id", "view", "service", "polarity", "status", "merged_into"), rows[0], strict=True))
    if found["status"] == "merged":
        raise CorrectionError(f"cluster {cluster_id} was merged into {found['merged_into']}; act on that one")
    return found


def _record_action(con: DuckDBPyConnection, action: str, cluster_id: int, actor: str, reason: str | None,
                   other_id: int | None = None, records: list[str] | None = None) -> None:
    con.execute(
        """INSERT INTO cluster_actions (action, cluster_id, other_id, records, reason, actor, acted_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)""",
        [action, cluster_id, other_id, orjson.dumps(records).decode() if records else None, reason, actor, now_utc()],
    )


def merge(warehouse: Warehouse, into: int, other: int, actor: str, reason: str | None = None) -> None:
    """Move every member of ``other`` into ``into``; ``other`` keeps a ``merged_into`` pointer."""
    if into == other:
        raise CorrectionError("a cluster cannot be merged into itself")
    target, source = _cluster(warehouse, into), _cluster(warehouse, other)
    for key in ("view", "service", "polarity"):
        if target[key] != source[key]:
            raise CorrectionError(
                f"clusters {into} and {other} differ in {key} ({target[key]} vs {source[key]}): "
                "clusters never span services or polarities"
            )
    con = warehouse.con
    now = now_utc()
    with transaction(con):
        con.execute("UPDATE cluster_members SET cluster_id = ? WHERE cluster_id = ?", [into, other])
        con.execute(
            "UPDATE clusters SET status = 'merged', merged_into = ?, updated_at = ? WHERE id = ?", [into, now, other]
        )
        # Anything that pointed at the absorbed cluster now points at the survivor.
        con.execute("UPDATE clusters SET merged_into = ? WHERE merged_into = ?", [into, other])
        _record_action(con, "merge", into, actor, reason, other_id=other)
    describe(warehouse, MiniLMEmbedder.model_id, target["view"], {into})


def split(warehouse: Warehouse, cluster_id: int, record_ids: list[str], actor: str, reason: str | None = None) -> int:
    """Move the given members (``id`` or ``collector:id``) into a new cluster; returns its id."""
    source = _cluster(warehouse, cluster_id)
    con = warehouse.con
    members = con.execute(
        "SELECT collector, id FROM cluster_members WHERE cluster_id = ?", [cluster_id]
    ).fetchall()
    chosen = _resolve_members(members, record_ids, cluster_id)
    if len(chosen) == len(members):
        raise CorrectionError(f"that is every member of cluster {cluster_id}: nothing would be left to split from")
    now = now_utc()
    with transaction(con):
        new_id = con.execute(
            """INSERT INTO clusters (view, service, polarity, created_at, updated_at)
               VALUES (?, ?, ?, ?, ?) RETURNING id""",
            [source["view"], source["service"], source["polarity"], now, now],
        ).fetchall()[0][0]
        for collector, record_id in chosen:
            con.execute(
                """UPDATE cluster_members SET cluster_id = ?, assigned_by = 'maintainer', assigned_at = ?
                   WHERE view = ? AND collector = ? AND id = ?""",
                [new_id, now, source["view"], collector, record_id],
            )
        _record_action(con, "split", cluster_id, actor, reason, other_id=new_id,
                       records=[f"{c}:{i}" for c, i in chosen])
    describe(warehouse, MiniLMEmbedder.model_id, source["view"], {cluster_id, new_id})
    return int(new_id)


def set_ignored(warehouse: Warehouse, cluster_id: int, actor: str, ignored: bool = True,
                reason: str | None = None) -> None:
    """Ignore a cluster (no drafts, out of the digest's top lists), or take that back."""
    found = _cluster(warehouse, cluster_id)
    if ignored == (found["status"] == "ignored"):
        raise CorrectionError(f"cluster {cluster_id} is {'already' if ignored else 'not'} ignored")
    con = warehouse.con
    with transaction(con):
        con.execute(
            "UPDATE clusters SET status = ?, updated_at = ? WHERE id = ?",
            ["ignored" if ignored else "open", now_utc(), cluster_id],
        )
        _record_action(con, "ignore" if ignored else "unignore", cluster_id, actor, reason)


def _resolve_members(members: list[tuple[str, str]], wanted: list[str], cluster_id: int) -> list[tuple[str, str]]:
    by_key = {f"{c}:{i}": (c, i) for c, i in members}
    by_id: dict[str, list[tuple[str, str]]] = {}
    for c, i in members:
        by_id.setdefault(i, []).append((c, i))
    chosen = []
    for ref in wanted:
        if ref in by_key:
            chosen.append(by_key[ref])
        elif len(by_id.get(ref, [])) == 1:
            chosen.append(by_id[ref][0])
        elif ref in by_id:
            raise CorrectionError(f"{ref} is ambiguous in cluster {cluster_id}: write collector:id")
        else:
            raise CorrectionError(f"{ref} is not a member of cluster {cluster_id}")
    if not chosen:
        raise CorrectionError("name at least one record to split off")
    return sorted(set(chosen))
