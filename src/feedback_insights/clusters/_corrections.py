"""Maintainers' corrections to the clustering: merge, split, move, ignore.

Each is one transaction that also writes a ``cluster_actions`` row (who, when, why). Later runs
respect them without remembering rules: runs never move a record that is in a cluster, a
merged cluster is no longer offered to new records (its members now sit in the cluster it was
merged into), and an ignored cluster still absorbs new reports of its problem, so they do not
surface again as a new cluster.

This layer knows nothing of drafts: a caller that must keep something else consistent with the
change (the drafts layer superseding a merged-away cluster's draft) passes ``then``, which runs
inside the same transaction with the ids of the clusters that were absorbed, and may refuse by
raising :class:`CorrectionError` (everything is rolled back).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import orjson
from duckdb import DuckDBPyConnection

from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._backends import members_model
from ._stage import describe

ENV_ACTOR = "FEEDBACK_INSIGHTS_USER"

#: Called inside a correction's transaction with the ids of the clusters it absorbed (merged
#: away, or emptied by a move); raising :class:`CorrectionError` undoes the correction.
Then = Callable[[list[int]], None]


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
    if found["status"] == "dissolved":
        raise CorrectionError(f"cluster {cluster_id} was dissolved by a rebuild: its reports are in no cluster")
    return found


def _record_action(con: DuckDBPyConnection, action: str, cluster_id: int, actor: str, reason: str | None,
                   other_id: int | None = None, records: list[str] | None = None) -> None:
    con.execute(
        """INSERT INTO cluster_actions (action, cluster_id, other_id, records, reason, actor, acted_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)""",
        [action, cluster_id, other_id, orjson.dumps(records).decode() if records else None, reason, actor, now_utc()],
    )


def merge(warehouse: Warehouse, into: int, other: int, actor: str, reason: str | None = None,
          then: Then | None = None) -> None:
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
        _absorb(con, other, into, now)
        _record_action(con, "merge", into, actor, reason, other_id=other)
        if then is not None:
            then([other])
    describe(warehouse, members_model(warehouse.con, target["view"]), target["view"], {into})


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
    describe(warehouse, members_model(warehouse.con, source["view"]), source["view"], {cluster_id, new_id})
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


@dataclass(frozen=True, slots=True)
class Moved:
    """What :func:`move` did: the records taken from each cluster (None: records that were in
    no cluster), and the clusters left with no member, now merged into the target."""

    target: int
    taken: dict[int | None, list[str]] = field(default_factory=dict)
    emptied: list[int] = field(default_factory=list)

    @property
    def sources(self) -> list[int]:
        """The clusters that lost records and still have some."""
        return sorted(c for c in self.taken if c is not None and c not in self.emptied)


def move(warehouse: Warehouse, record_ids: list[str], to: int, actor: str, reason: str | None = None,
         then: Then | None = None) -> Moved:
    """Move reports (``id`` or ``collector:id``, clustered or not) into cluster ``to`` of the same
    view and service, of any polarity: a report a maintainer reads as praise may join a praise
    cluster, one they read as a feature request a request cluster, and the other way round. Services never mix (their issues go to different
    repositories). A cluster left with no member is merged into ``to`` (its id still resolves)."""
    target = _cluster(warehouse, to)
    con = warehouse.con
    chosen = _resolve_records(con, target, record_ids)
    taken: dict[int | None, list[str]] = {}
    for collector, record_id, cluster_id in chosen:
        taken.setdefault(cluster_id, []).append(f"{collector}:{record_id}")
    left = dict(con.execute(
        """SELECT cluster_id, count(*) FROM cluster_members WHERE view = ? AND list_contains(?, cluster_id)
           GROUP BY cluster_id""", [target["view"], [c for c in taken if c is not None]]).fetchall())
    emptied = sorted(c for c in taken if c is not None and left.get(c, 0) == len(taken[c]))
    now = now_utc()
    with transaction(con):
        for collector, record_id, _ in chosen:
            con.execute(
                """UPDATE cluster_members SET cluster_id = ?, assigned_by = 'maintainer', assigned_at = ?
                   WHERE view = ? AND collector = ? AND id = ?""",
                [to, now, target["view"], collector, record_id],
            )
        for source in emptied:
            _absorb(con, source, to, now)
        for origin, records in taken.items():
            _record_action(con, "move", to, actor, reason, other_id=origin, records=records)
        if then is not None:
            then(emptied)
    moved = Moved(to, taken, emptied)
    describe(warehouse, members_model(warehouse.con, target["view"]), target["view"], {to, *moved.sources})
    return moved


def _absorb(con: DuckDBPyConnection, absorbed: int, into: int, now: datetime) -> None:
    """``absorbed`` (now without members) becomes a pointer to ``into``, and so does anything
    that pointed at it."""
    con.execute("UPDATE clusters SET status = 'merged', merged_into = ?, updated_at = ? WHERE id = ?", [into, now, absorbed])
    con.execute("UPDATE clusters SET merged_into = ? WHERE merged_into = ?", [into, absorbed])


#: The records a move names, with their cluster (NULL: in none yet) and service.
_RECORDS = """
SELECT m.collector, m.id, m.cluster_id, r.service
FROM cluster_members m JOIN records r USING (collector, id)
WHERE m.view = $view AND (list_contains($refs, m.id) OR list_contains($refs, m.collector || ':' || m.id))
ORDER BY m.collector, m.id
"""


def _resolve_records(con: DuckDBPyConnection, target: dict, wanted: list[str]) -> list[tuple[str, str, int | None]]:
    """``(collector, id, cluster)`` of each record named, in ``target``'s view: every name must be
    one record of that view, not already in ``target``, and of ``target``'s service."""
    if not wanted:
        raise CorrectionError("name at least one record to move")
    rows = con.sql(_RECORDS, params={"view": target["view"], "refs": list(wanted)}).fetchall()
    chosen: dict[tuple[str, str], tuple[str, str, int | None]] = {}
    for ref in wanted:
        found = [row for row in rows if ref in (row[1], f"{row[0]}:{row[1]}")]
        if not found:
            shown = ref if len(ref) <= 80 else ref[:79] + "…"  # an id is the user's input: any length
            raise CorrectionError(f"no record {shown} in the {target['view']} view (feedback-insights clusters show lists them)")
        if len(found) > 1:
            raise CorrectionError(f"{ref} is ambiguous: write collector:id")
        collector, record_id, cluster_id, service = found[0]
        if cluster_id == target["id"]:
            raise CorrectionError(f"{ref} is already in cluster {target['id']}")
        if service != target["service"]:
            raise CorrectionError(
                f"{ref} is a report on {service or 'no service'}, cluster {target['id']} is {target['service'] or 'no service'}'s: "
                "a report never moves across services (their issues go to different repositories)"
            )
        chosen[(collector, record_id)] = (collector, record_id, cluster_id)
    return sorted(chosen.values())


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
