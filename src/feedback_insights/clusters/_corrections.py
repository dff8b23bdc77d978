"""Maintainers' corrections to the clustering: merge, split, move, ignore, rename, and undo.

Each is one transaction that also writes a ``cluster_actions`` row (who, when, why, and in
``before`` what an undo needs to put back). Later runs
respect them without remembering rules: runs never move a record that is in a cluster, a
merged cluster is no longer offered to new records (its members now sit in the cluster it was
merged into), and an ignored cluster still absorbs new reports of its problem, so they do not
surface again as a new cluster.

This layer knows nothing of drafts: a caller that must keep something else consistent with the
change (the drafts layer superseding a merged-away cluster's draft) passes ``then``, which runs
inside the same transaction with the ids of the clusters that were absorbed, and may refuse by
raising :class:`CorrectionError` (everything is rolled back).

Names: a correction leaves the name of a cluster that only gained reports (a merge's survivor,
a move's target) and gives an undone cluster its old name back; the naming rule names what lost
reports and what is new, and finds a better name, if there is one, when a run next changes the
cluster. A name a maintainer gave (:func:`rename`, ``clusters.given_name``) is never replaced.

Undo (:func:`undo`): a merge, split, move or rename, by a maintainer or an LLM, is taken back by
its ``cluster_actions`` id; the undo is itself a recorded row (``undo``, ``undoes``), and the
row it took back says ``undone_by``.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from duckdb import DuckDBPyConnection

from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._backends import members_model
from ._stage import describe
from ._titles import NAME_CHARS

ENV_ACTOR = "FEEDBACK_INSIGHTS_USER"

#: Called inside a correction's transaction with the ids of the clusters it absorbed (merged
#: away, or emptied by a move); raising :class:`CorrectionError` undoes the correction.
Then = Callable[[list[int]], None]


class CorrectionError(ValueError):
    """A correction that cannot be applied; the message says why."""


def default_actor() -> str:
    """Who is acting: ``$FEEDBACK_INSIGHTS_USER``, else the login name."""
    return os.environ.get(ENV_ACTOR) or getpass.getuser()


#: The columns of a cluster a correction reads; an undo puts ``status`` and the names back.
_COLUMNS = ("id", "view", "service", "polarity", "status", "merged_into", "label", "given_name")


def _cluster(warehouse: Warehouse, cluster_id: int, live: bool = True) -> dict[str, Any]:
    rows = warehouse.con.execute(f"SELECT {', '.join(_COLUMNS)} FROM clusters WHERE id = ?", [cluster_id]).fetchall()
    if not rows:
        raise CorrectionError(f"no cluster {cluster_id}")
    found = dict(zip(_COLUMNS, rows[0], strict=True))
    if live and found["status"] == "merged":
        raise CorrectionError(f"cluster {cluster_id} was merged into {found['merged_into']}; act on that one")
    if live and found["status"] == "dissolved":
        raise CorrectionError(f"cluster {cluster_id} was dissolved by a rebuild: its reports are in no cluster")
    return found


def _record_action(con: DuckDBPyConnection, action: str, cluster_id: int, actor: str, reason: str | None,
                   other_id: int | None = None, records: list[str] | None = None,
                   before: dict[str, Any] | None = None, undoes: int | None = None,
                   now: datetime | None = None) -> int:
    """Write one ``cluster_actions`` row; returns its id (what ``clusters undo`` takes)."""
    (action_id,) = con.execute(
        """INSERT INTO cluster_actions (action, cluster_id, other_id, records, reason, actor, acted_at, before, undoes)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
        [action, cluster_id, other_id, orjson.dumps(records).decode() if records else None, reason, actor,
         now or now_utc(), orjson.dumps(before).decode() if before else None, undoes],
    ).fetchall()[0]
    return int(action_id)


def _members(con: DuckDBPyConnection, cluster_id: int) -> list[str]:
    return [f"{c}:{i}" for c, i in con.execute(
        "SELECT collector, id FROM cluster_members WHERE cluster_id = ? ORDER BY collector, id", [cluster_id]).fetchall()]


def _snapshot(con: DuckDBPyConnection, found: dict[str, Any]) -> dict[str, Any]:
    """What an undo of absorbing ``found`` puts back: its status, names, and the clusters that
    pointed at it (they are re-pointed at the survivor)."""
    pointing = [row[0] for row in con.execute("SELECT id FROM clusters WHERE merged_into = ? ORDER BY id",
                                              [found["id"]]).fetchall()]
    return {"status": found["status"], "label": found["label"], "given_name": found["given_name"], "pointing": pointing}


def merge(warehouse: Warehouse, into: int, other: int, actor: str, reason: str | None = None,
          then: Then | None = None) -> int:
    """Move every member of ``other`` into ``into``; ``other`` keeps a ``merged_into`` pointer,
    ``into`` keeps its name. Returns the action's id (:func:`undo` takes it)."""
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
        records, before = _members(con, other), _snapshot(con, source)
        con.execute("UPDATE cluster_members SET cluster_id = ? WHERE cluster_id = ?", [into, other])
        _absorb(con, other, into, now)
        action_id = _record_action(con, "merge", into, actor, reason, other_id=other, records=records,
                                   before=before, now=now)
        if then is not None:
            then([other])
    _describe(warehouse, target["view"], {into}, keep={into: target["label"]})
    return action_id


def split(warehouse: Warehouse, cluster_id: int, record_ids: list[str], actor: str, reason: str | None = None) -> int:
    """Move the given members (``id`` or ``collector:id``) into a new cluster; returns its id
    (the action's is :func:`latest_action`)."""
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
        _assign(con, source["view"], chosen, new_id, now)
        _record_action(con, "split", cluster_id, actor, reason, other_id=new_id,
                       records=[f"{c}:{i}" for c, i in chosen], now=now)
    _describe(warehouse, source["view"], {cluster_id, new_id})
    return int(new_id)


def _assign(con: DuckDBPyConnection, view: str, chosen: list[tuple[str, str]], cluster_id: int | None,
            now: datetime) -> None:
    for collector, record_id in chosen:
        con.execute(
            """UPDATE cluster_members SET cluster_id = ?, assigned_by = 'maintainer', assigned_at = ?
               WHERE view = ? AND collector = ? AND id = ?""",
            [cluster_id, now, view, collector, record_id],
        )


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


def given_name(name: str) -> str:
    """A maintainer's name for a cluster as it is kept: one printable line of at most
    :data:`NAME_CHARS` characters (it is the issue's title too)."""
    kept = " ".join(name.split())
    if not kept:
        raise CorrectionError("a name must say something: leave it out to hand the cluster back to the naming rule")
    if len(kept) > NAME_CHARS:
        raise CorrectionError(f"a name is at most {NAME_CHARS} characters (it is the issue's title); this one is {len(kept)}")
    if not kept.isprintable():
        raise CorrectionError("a name is one line of printable characters")
    return kept


def rename(warehouse: Warehouse, cluster_id: int, name: str | None, actor: str, reason: str | None = None) -> int:
    """Give a cluster a maintainer's name, which no later naming replaces; ``None`` hands it
    back to the naming rule. Returns the action's id."""
    found = _cluster(warehouse, cluster_id)
    kept = given_name(name) if name is not None else None
    if kept == found["given_name"]:
        raise CorrectionError(f"cluster {cluster_id} is already {'called ' + repr(kept) if kept else 'named by the rule'}")
    con = warehouse.con
    with transaction(con):
        con.execute("UPDATE clusters SET given_name = ?, label = coalesce(?, label), updated_at = ? WHERE id = ?",
                    [kept, kept, now_utc(), cluster_id])
        action_id = _record_action(con, "rename", cluster_id, actor, reason,
                                   before={"given_name": found["given_name"], "label": found["label"], "name": kept})
    if kept is None:
        _describe(warehouse, found["view"], {cluster_id})
    return action_id


def _describe(warehouse: Warehouse, view: str, ids: set[int], keep: dict[int, str | None] | None = None) -> None:
    """Describe ``ids`` again (figures, medoid, confidence, the rule's name), then put back the
    names that stay: a maintainer's always, and ``keep``'s (cluster → its name before)."""
    describe(warehouse, members_model(warehouse.con, view), view, ids)
    for cluster_id in sorted(ids):
        warehouse.con.execute("UPDATE clusters SET label = coalesce(given_name, ?, label) WHERE id = ?",
                              [(keep or {}).get(cluster_id), cluster_id])


def latest_action(warehouse: Warehouse) -> int | None:
    """The id of the newest ``cluster_actions`` row (the correction just made, on this connection)."""
    (found,) = warehouse.con.execute("SELECT max(id) FROM cluster_actions").fetchall()[0]
    return None if found is None else int(found)


@dataclass(frozen=True, slots=True)
class Moved:
    """What :func:`move` did: the records taken from each cluster (None: records that were in
    no cluster), the clusters left with no member, now merged into the target, and the
    ``cluster_actions`` rows written (one per origin; :func:`undo` of any takes back all)."""

    target: int
    taken: dict[int | None, list[str]] = field(default_factory=dict)
    emptied: list[int] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)

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
        before = {str(c): _snapshot(con, _cluster(warehouse, c)) for c in emptied}
        _assign(con, target["view"], [(c, i) for c, i, _ in chosen], to, now)
        for source in emptied:
            _absorb(con, source, to, now)
        actions = [_record_action(con, "move", to, actor, reason, other_id=origin, records=records,
                                  before={"emptied": before} if before else None, now=now)
                   for origin, records in taken.items()]
        if then is not None:
            then(emptied)
    moved = Moved(to, taken, emptied, actions)
    _describe(warehouse, target["view"], {to, *moved.sources}, keep={to: target["label"]})
    return moved


def _absorb(con: DuckDBPyConnection, absorbed: int, into: int, now: datetime) -> None:
    """``absorbed`` (now without members) becomes a pointer to ``into``, and so does anything
    that pointed at it."""
    con.execute("UPDATE clusters SET status = 'merged', merged_into = ?, updated_at = ? WHERE id = ?", [into, now, absorbed])
    con.execute("UPDATE clusters SET merged_into = ? WHERE merged_into = ?", [into, absorbed])


#: The corrections :func:`undo` takes back.
UNDOABLE = ("merge", "split", "move", "rename")
_HISTORY = """
SELECT id, action, cluster_id, other_id, records, reason, actor, acted_at, before, undoes, undone_by
FROM cluster_actions WHERE $cluster::INTEGER IS NULL OR $cluster IN (cluster_id, other_id) ORDER BY id
"""


@dataclass(frozen=True, slots=True)
class ClusterAction:
    """One recorded correction (a ``cluster_actions`` row), told as a sentence."""

    id: int
    action: str
    cluster_id: int
    other_id: int | None
    records: list[str]
    reason: str | None
    actor: str
    acted_at: datetime
    before: dict[str, Any]
    undoes: int | None
    undone_by: int | None

    @property
    def can_undo(self) -> bool:
        """Whether :func:`undo` may take it back: an undoable kind, not undone yet, and (for a
        merge) recorded with its members, as merges are since undo exists."""
        return self.action in UNDOABLE and self.undone_by is None and (self.action != "merge" or bool(self.before))

    def sentence(self) -> str:
        """What happened, for a person: "dana merged cluster 6 into cluster 4 (12 reports): same bug"."""
        who, count = _who(self.actor), len(self.records)
        reports = f"{count} report{'' if count == 1 else 's'}"
        other = f"cluster {self.other_id}" if self.other_id is not None else "no cluster"
        said = {
            "merge": f"{who} merged {other} into cluster {self.cluster_id}" + (f" ({reports})" if count else ""),
            "split": f"{who} split {reports} off cluster {self.cluster_id} into new {other}",
            "move": f"{who} moved {reports} from {other} into cluster {self.cluster_id}",
            "ignore": f"{who} ignored cluster {self.cluster_id}",
            "unignore": f"{who} took back the ignore of cluster {self.cluster_id}",
            "rename": (f"{who} named cluster {self.cluster_id} \u201c{self.before['name']}\u201d" if self.before.get("name")
                       else f"{who} handed cluster {self.cluster_id}'s name back to the naming rule"),
            "undo": f"{who} undid correction #{self.undoes}" + (f" ({reports} went back)" if count else ""),
            "rebuild": f"{who} rebuilt the clusters",
        }.get(self.action, f"{who}: {self.action} of cluster {self.cluster_id}")
        if self.reason:
            said += f" ({self.reason})" if self.action == "rebuild" else f": {self.reason}"
        return said + (f" \u2014 undone by #{self.undone_by}" if self.undone_by is not None else "")


def _who(actor: str) -> str:
    """An actor as a sentence names them: ``llm:model`` is the LLM."""
    return f"the LLM ({actor[4:]})" if actor.startswith("llm:") else actor


def history(warehouse: Warehouse, cluster_id: int | None = None) -> list[ClusterAction]:
    """Every correction (of ``cluster_id``, either side, when given), oldest first."""
    rows = warehouse.con.execute(_HISTORY, {"cluster": cluster_id}).fetchall()
    return [ClusterAction(row[0], row[1], row[2], row[3], orjson.loads(row[4]) if row[4] else [], row[5], row[6],
                          row[7], orjson.loads(row[8]) if row[8] else {}, row[9], row[10]) for row in rows]


def undoable(warehouse: Warehouse, cluster_id: int | None = None) -> list[ClusterAction]:
    """The corrections :func:`undo` can take back (of ``cluster_id`` when given), newest first."""
    return [a for a in reversed(history(warehouse, cluster_id)) if a.can_undo]


@dataclass(frozen=True, slots=True)
class Undone:
    """What :func:`undo` did: the action taken back, the ``undo`` row(s) that record it, the
    clusters brought back (reopened, or given their reports back), the clusters it merged away
    (a split's new cluster), and each cluster whose reports changed, with why."""

    undone: ClusterAction
    undo_ids: list[int]
    restored: list[int] = field(default_factory=list)
    absorbed: list[int] = field(default_factory=list)
    changed: dict[int, str] = field(default_factory=dict)


def undo(warehouse: Warehouse, action_id: int, actor: str, reason: str | None = None,
         then: Then | None = None) -> Undone:
    """Take back correction ``action_id`` (see the module docstring); ``then`` runs inside the
    transaction with the clusters the undo merged away (a split's new cluster), as for a merge."""
    found = next((a for a in history(warehouse) if a.id == action_id), None)
    if found is None:
        raise CorrectionError(f"no correction #{action_id} (the cluster page and clusters history list them)")
    if found.undone_by is not None:
        raise CorrectionError(f"correction #{action_id} was already undone (by #{found.undone_by})")
    if found.action not in UNDOABLE:
        hint = {"ignore": ": unignore the cluster instead", "unignore": ": ignore the cluster again instead",
                "undo": f": do #{found.undoes} again instead"}.get(found.action, "")
        raise CorrectionError(f"correction #{action_id} is a{'n' if found.action[0] in 'aeiou' else ''} "
                              f"{found.action}, which cannot be undone{hint}")
    if not found.can_undo:
        raise CorrectionError(f"merge #{action_id} was recorded before merges kept their reports: "
                              f"split cluster {found.other_id}'s reports out of cluster {found.cluster_id} instead")
    return {"merge": _undo_merge, "split": _undo_split, "move": _undo_move, "rename": _undo_rename}[found.action](
        warehouse, found, actor, reason, then)


def _undo_merge(warehouse: Warehouse, done: ClusterAction, actor: str, reason: str | None,
                then: Then | None) -> Undone:
    into, other = done.cluster_id, int(done.other_id or 0)
    survivor, absorbed = _cluster(warehouse, into, live=False), _cluster(warehouse, other, live=False)
    if absorbed["status"] != "merged":
        raise CorrectionError(f"cluster {other} is {absorbed['status']} again already: nothing to undo")
    _still_live(survivor, done.id)
    con, now = warehouse.con, now_utc()
    back = _still_in(con, into, done.records)
    if not back:
        raise CorrectionError(f"none of cluster {other}'s reports are in cluster {into} any more: nothing to take back")
    with transaction(con):
        _reopen(con, other, done.before, into, now)
        _take_back(con, into, back, other, now)
        undo_id = _record_action(con, "undo", into, actor, reason, other_id=other, records=back, undoes=done.id, now=now)
        con.execute("UPDATE cluster_actions SET undone_by = ? WHERE id = ?", [undo_id, done.id])
    _describe(warehouse, survivor["view"], {into, other}, keep={into: survivor["label"], other: done.before["label"]})
    why = f"the merge of cluster {other} into it was undone ({len(back)} reports went back)"
    return Undone(done, [undo_id], restored=[other],
                  changed={into: why, other: f"its merge into cluster {into} was undone"})


def _undo_split(warehouse: Warehouse, done: ClusterAction, actor: str, reason: str | None,
                then: Then | None) -> Undone:
    """The split-off cluster (with any report it gained since) merges back into its source."""
    source, new = done.cluster_id, int(done.other_id or 0)
    origin, split_off = _cluster(warehouse, source, live=False), _cluster(warehouse, new, live=False)
    _still_live(origin, done.id)
    _still_live(split_off, done.id)
    con, now = warehouse.con, now_utc()
    with transaction(con):
        records, before = _members(con, new), _snapshot(con, split_off)
        con.execute("UPDATE cluster_members SET cluster_id = ? WHERE cluster_id = ?", [source, new])
        _absorb(con, new, source, now)
        undo_id = _record_action(con, "undo", source, actor, reason, other_id=new, records=records, before=before,
                                 undoes=done.id, now=now)
        con.execute("UPDATE cluster_actions SET undone_by = ? WHERE id = ?", [undo_id, done.id])
        if then is not None:
            then([new])
    _describe(warehouse, origin["view"], {source}, keep={source: origin["label"]})
    return Undone(done, [undo_id], restored=[source], absorbed=[new],
                  changed={source: f"the split into cluster {new} was undone ({len(records)} reports came back)"})


def _undo_move(warehouse: Warehouse, done: ClusterAction, actor: str, reason: str | None,
               then: Then | None) -> Undone:
    """Every report of the move (all its origins) still in the target goes back where it came
    from: its old cluster (reopened, with its name, if the move emptied it) or no cluster (the
    next run places it as it would any new report)."""
    to = done.cluster_id
    target = _cluster(warehouse, to, live=False)
    _still_live(target, done.id)
    group = [a for a in history(warehouse, to) if a.action == "move" and a.cluster_id == to and a.undone_by is None
             and a.acted_at == done.acted_at and a.actor == done.actor]
    emptied: dict[str, dict[str, Any]] = done.before.get("emptied", {})
    con, now = warehouse.con, now_utc()
    plan = [(a, _still_in(con, to, a.records)) for a in group]
    if not any(back for _, back in plan):
        raise CorrectionError(f"none of the moved reports are in cluster {to} any more: nothing to take back")
    for a, _ in plan:
        if a.other_id is not None and str(a.other_id) not in emptied:
            _still_live(_cluster(warehouse, a.other_id, live=False), done.id)
    undo_ids, changed = [], {}
    with transaction(con):
        for a, back in plan:
            if a.other_id is not None and str(a.other_id) in emptied:
                _reopen(con, a.other_id, emptied[str(a.other_id)], to, now)
            _take_back(con, to, back, a.other_id, now)
            undo_ids.append(_record_action(con, "undo", to, actor, reason, other_id=a.other_id, records=back,
                                           undoes=a.id, now=now))
            con.execute("UPDATE cluster_actions SET undone_by = ? WHERE id = ?", [undo_ids[-1], a.id])
            if a.other_id is not None:
                changed[a.other_id] = f"the move of {len(back)} of its reports to cluster {to} was undone"
    count = sum(len(back) for _, back in plan)
    changed[to] = f"the move of {count} reports into it was undone"
    _describe(warehouse, target["view"], set(changed),
              keep={int(c): before["label"] for c, before in emptied.items()})
    return Undone(done, undo_ids, restored=sorted(c for c in changed if c != to), changed=changed)


def _undo_rename(warehouse: Warehouse, done: ClusterAction, actor: str, reason: str | None,
                 then: Then | None) -> Undone:
    found = _cluster(warehouse, done.cluster_id, live=False)
    if found["given_name"] != done.before.get("name"):
        raise CorrectionError(f"cluster {done.cluster_id} was renamed again since #{done.id}: undo the later rename")
    con = warehouse.con
    with transaction(con):
        con.execute("UPDATE clusters SET given_name = ?, label = ?, updated_at = ? WHERE id = ?",
                    [done.before.get("given_name"), done.before.get("label"), now_utc(), done.cluster_id])
        undo_id = _record_action(con, "undo", done.cluster_id, actor, reason, undoes=done.id)
        con.execute("UPDATE cluster_actions SET undone_by = ? WHERE id = ?", [undo_id, done.id])
    return Undone(done, [undo_id], changed={done.cluster_id: "its name was given back"})


def _still_live(found: dict[str, Any], action_id: int) -> None:
    """Refuses to undo ``action_id`` when a cluster it needs has since gone."""
    if found["status"] == "merged":
        raise CorrectionError(f"cluster {found['id']} has since been merged into {found['merged_into']}: "
                              f"undo that merge before #{action_id}")
    if found["status"] == "dissolved":
        raise CorrectionError(f"cluster {found['id']} has since been dissolved by a rebuild: #{action_id} cannot be undone")


def _still_in(con: DuckDBPyConnection, cluster_id: int, records: list[str]) -> list[str]:
    """The ``collector:id`` of ``records`` that are members of ``cluster_id`` now."""
    members = set(_members(con, cluster_id))
    return [r for r in records if r in members]


def _take_back(con: DuckDBPyConnection, holder: int, records: list[str], to: int | None, now: datetime) -> None:
    con.execute(
        """UPDATE cluster_members SET cluster_id = ?, assigned_by = 'maintainer', assigned_at = ?
           WHERE cluster_id = ? AND list_contains(?, collector || ':' || id)""",
        [to, now, holder, records],
    )


def _reopen(con: DuckDBPyConnection, cluster_id: int, before: dict[str, Any], survivor: int, now: datetime) -> None:
    """An absorbed cluster as it was: its status and names, and what pointed at it."""
    con.execute("UPDATE clusters SET status = ?, merged_into = NULL, label = ?, given_name = ?, updated_at = ? WHERE id = ?",
                [before["status"], before["label"], before["given_name"], now, cluster_id])
    con.execute("UPDATE clusters SET merged_into = ? WHERE merged_into = ? AND list_contains(?, id)",
                [cluster_id, survivor, before.get("pointing", [])])


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
