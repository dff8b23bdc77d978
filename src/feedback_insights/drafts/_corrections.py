"""Maintainers' corrections that reach the drafts: one function per correction, each doing the
cluster change and the draft follow-up, for the CLI and a review desk alike.

What follows a correction, at once:

- a pending draft of a cluster that changed is re-rendered through the drafting stage's own code
  (figures, quotes, evidence); one a maintainer edited keeps its text and gets a note saying why
  it should be checked;
- an approved draft not filed yet goes back to pending with a note: the text approved no longer
  describes the cluster;
- a merged-away cluster's draft is never filed alongside the survivor's. When the survivor has no
  draft, the absorbed cluster's pending or approved draft becomes the survivor's (its marker
  follows); otherwise it is ``superseded`` (publish skips it, collectors get no known_issue for it);
- when both clusters' issues are filed, the survivor's (``into``) stays; the other is recorded as
  its duplicate, and the next ``publish`` comments "Duplicate of #N" and closes it as a duplicate
  on GitHub (retried until done). A filed issue is never left without its reports for a cluster
  that has none: merging a filed cluster into one that is not is refused, naming the other way.

Every step is recorded in ``draft_actions`` with who acted, so ``drafts show`` tells the story.

Every merge, split, move and rename can be undone (:func:`undo_correction`, by the id of its
``cluster_actions`` row, which each function here returns in :attr:`Correction.action`); a merge
is confirmed first with :func:`merge_preview`, which says what it would do and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..clusters import (
    CorrectionError,
    Embedder,
    Rebuild,
    StageAssist,
    demand,
    history,
    latest_action,
    merge,
    move,
    rebuild,
    rename,
    set_ignored,
    split,
    undo,
    undo_merge,
)
from ..config import Config
from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._compose import llm_draft, template_draft
from ._inputs import draft_input
from ._llm import ChatClient
from ._marker import MARKER_LINE, marker
from ._stage import DRAFTED, _cited, _drafts_by_cluster, _store, record_action

#: Draft statuses whose text is still to be filed: a correction re-renders or re-opens them.
_UNFILED = ("pending", "approved")


@dataclass(slots=True)
class Correction:
    """What a correction did to the drafts (draft ids), and the issues it settled."""

    #: A new cluster the correction made (``split``).
    new_cluster: int | None = None
    #: The ``cluster_actions`` row it wrote: what :func:`undo_correction` takes.
    action: int | None = None
    #: Clusters an undo brought back (reopened, or given their reports back).
    restored: list[int] = field(default_factory=list)
    #: Drafts an undo made pending again (their cluster is back).
    revived: list[int] = field(default_factory=list)
    #: Things a maintainer must do by hand (an issue already closed as a duplicate on GitHub).
    by_hand: list[str] = field(default_factory=list)
    rerendered: list[int] = field(default_factory=list)
    #: Approved drafts put back to pending.
    reopened: list[int] = field(default_factory=list)
    #: Drafts a maintainer edited: their text was kept, with a note to check it.
    kept: list[int] = field(default_factory=list)
    #: ``(draft, survivor's draft or None)``: never to be filed.
    superseded: list[tuple[int, int | None]] = field(default_factory=list)
    #: ``(draft, cluster)``: an absorbed cluster's draft that became the survivor's.
    taken_over: list[tuple[int, int]] = field(default_factory=list)
    #: ``(duplicate issue url, surviving issue url)``: closed as a duplicate by the next publish.
    duplicates: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per thing a maintainer should know, for the CLI."""
        out = [f"issue {survivor} survives; {duplicate} will be closed as its duplicate by the next publish"
               for duplicate, survivor in self.duplicates]
        out += [f"draft {draft} superseded" + (f" by draft {by}" if by else "") + ": it will not be filed"
                for draft, by in self.superseded]
        out += [f"draft {draft} is now cluster {cluster}'s" for draft, cluster in self.taken_over]
        out += [f"cluster {cluster} is back" for cluster in self.restored]
        out += [f"draft {draft} is pending again: its cluster is back" for draft in self.revived]
        out += self.by_hand
        if self.rerendered:
            out.append(f"re-rendered draft{'s' if len(self.rerendered) > 1 else ''} {_ids(self.rerendered)}")
        if self.reopened:
            out.append(f"approved draft{'s' if len(self.reopened) > 1 else ''} {_ids(self.reopened)} back to pending: "
                       "review again (drafts show)")
        if self.kept:
            out.append(f"edited draft{'s' if len(self.kept) > 1 else ''} {_ids(self.kept)} kept their text: "
                       "check the figures and quotes (drafts edit)")
        return out


def merge_clusters(config: Config, warehouse: Warehouse, into: int, other: int, actor: str,
                   reason: str | None = None, client: ChatClient | None = None) -> Correction:
    """``clusters merge INTO OTHER`` and what follows for both clusters' drafts."""
    done = Correction()
    hint = f"merge the other way round (clusters merge {other} {into}) so that the filed issue survives"
    done.action = merge(warehouse, into, other, actor, reason,
                        then=lambda absorbed: _absorbed(warehouse, absorbed, into, actor, "was merged into", hint, done))
    _follow_up(config, warehouse, {into: f"cluster {other} was merged into it"}, actor, client, done)
    return done


def split_cluster(config: Config, warehouse: Warehouse, cluster_id: int, record_ids: list[str], actor: str,
                  reason: str | None = None, client: ChatClient | None = None) -> Correction:
    """``clusters split`` and what follows for the split cluster's draft (the new cluster is
    drafted by the drafting stage once it crosses the threshold)."""
    done = Correction()
    done.new_cluster = split(warehouse, cluster_id, record_ids, actor, reason)
    done.action = latest_action(warehouse)
    why = f"{len(record_ids)} reports were split off into cluster {done.new_cluster}"
    _follow_up(config, warehouse, {cluster_id: why}, actor, client, done)
    return done


def unmerge_cluster(config: Config, warehouse: Warehouse, absorbed: int, actor: str,
                    client: ChatClient | None = None) -> Correction:
    """``clusters unmerge ABSORBED``: undo the newest merge that absorbed cluster ``absorbed``,
    a maintainer's or an LLM's (:func:`undo_correction`). An LLM's merge recorded before merges
    kept their reports is taken back as before: its reports split out of the survivor into a new
    cluster."""
    merges = [a for a in reversed(history(warehouse, absorbed)) if a.action == "merge" and a.other_id == absorbed
              and a.undone_by is None]
    if merges and merges[0].can_undo:
        return undo_correction(config, warehouse, merges[0].id, actor, client=client)
    done = Correction()
    (survivor,) = warehouse.con.execute("SELECT merged_into FROM clusters WHERE id = ?", [absorbed]).fetchone() or (None,)
    try:
        done.new_cluster = undo_merge(warehouse, absorbed, actor)
    except CorrectionError:
        if not merges:
            raise CorrectionError(f"cluster {absorbed} was not merged into another cluster: nothing to unmerge") from None
        raise CorrectionError(f"merge #{merges[0].id} was recorded before merges kept their reports: split cluster "
                              f"{absorbed}'s reports out of cluster {merges[0].cluster_id} instead") from None
    done.action = latest_action(warehouse)
    if survivor is not None:
        why = f"the LLM's merge of cluster {absorbed} was undone (its reports are cluster {done.new_cluster})"
        _follow_up(config, warehouse, {survivor: why}, actor, client, done)
    return done


def undo_correction(config: Config, warehouse: Warehouse, action_id: int, actor: str, reason: str | None = None,
                    client: ChatClient | None = None) -> Correction:
    """``clusters undo ACTION``: take back a merge, split, move or rename (see the clusters'
    :func:`~feedback_insights.clusters.undo`) and follow it through the drafts: a draft the merge
    superseded is pending again, a filed issue it marked as a duplicate is not closed (or, when
    publish closed it already, the maintainer is told to reopen it), a split-off cluster's draft is
    superseded as after any merge, and every unfiled draft of a changed cluster is re-rendered."""
    done = Correction()
    hint = "undo it by moving reports instead, so that the filed issue keeps some"

    found = next((a for a in history(warehouse) if a.id == action_id), None)
    into = found.cluster_id if found is not None else 0  # no such action: undo says so
    result = undo(warehouse, action_id, actor, reason,
                  then=lambda ids: _absorbed(warehouse, ids, into, actor, "was merged back by an undo into", hint, done))
    done.action, done.restored = result.undo_ids[0], list(result.restored)
    if result.undone.action in ("merge", "move"):
        for cluster_id in result.restored:
            _revive(warehouse, cluster_id, f"cluster {cluster_id} is back: correction #{action_id} was undone", actor, done)
    _follow_up(config, warehouse, result.changed, actor, client, done)
    return done


def _revive(warehouse: Warehouse, cluster_id: int, why: str, actor: str, done: Correction) -> None:
    """The draft of a cluster an undo brought back (its merge, or the move that emptied it,
    undone): superseded → pending (re-rendered next); a filed issue marked as the survivor's
    duplicate → not closed, or, closed already, the maintainer told to reopen it. A draft the
    survivor took over stays the survivor's."""
    drafted = _drafts_by_cluster(warehouse).get(cluster_id)
    if drafted is None:
        return
    now = now_utc()
    if drafted["status"] == "superseded":
        warehouse.con.execute("UPDATE drafts SET status = 'pending', superseded_by = NULL, updated_at = ? WHERE id = ?",
                              [now, drafted["id"]])
        record_action(warehouse, drafted["id"], "pending again", actor, {"why": why})
        done.revived.append(drafted["id"])
    elif drafted["status"] == "filed" and drafted["superseded_by"] is not None:
        warehouse.con.execute("UPDATE drafts SET superseded_by = NULL, updated_at = ? WHERE id = ?", [now, drafted["id"]])
        record_action(warehouse, drafted["id"], "no longer a duplicate", actor, {"why": why})
        if drafted["duplicate_marked_at"] is not None:
            done.by_hand.append(f"issue {drafted['issue_url']} was already closed as a duplicate on GitHub: reopen it there")


def rename_cluster(config: Config, warehouse: Warehouse, cluster_id: int, name: str | None, actor: str,
                   client: ChatClient | None = None) -> Correction:
    """``clusters rename``: a maintainer's name for the cluster, which no later naming replaces
    (None: back to the naming rule's); its unfiled draft is re-rendered, so the title follows."""
    done = Correction()
    done.action = rename(warehouse, cluster_id, name, actor)
    why = f"the cluster was named \u201c{name}\u201d" if name else "the cluster's name is the naming rule's again"
    _follow_up(config, warehouse, {cluster_id: why}, actor, client, done)
    return done


def move_records(config: Config, warehouse: Warehouse, record_ids: list[str], to: int, actor: str,
                 reason: str | None = None, client: ChatClient | None = None) -> Correction:
    """``clusters move RECORD… --to CLUSTER`` and what follows for the drafts of the clusters that
    lost reports, the one that gained them, and any cluster the move emptied."""
    done = Correction()
    hint = "move fewer reports, so that the filed issue keeps some"
    moved = move(warehouse, record_ids, to, actor, reason,
                 then=lambda emptied: _absorbed(warehouse, emptied, to, actor, "was emptied by a move into", hint, done))
    done.action = moved.actions[0]
    count = sum(len(records) for records in moved.taken.values())
    changed = {source: f"{len(moved.taken[source])} reports moved to cluster {to}" for source in moved.sources}
    _follow_up(config, warehouse, {**changed, to: f"{count} reports moved into it"}, actor, client, done)
    return done


def ignore_cluster(config: Config, warehouse: Warehouse, cluster_id: int, actor: str, ignored: bool = True,
                   reason: str | None = None, client: ChatClient | None = None) -> Correction:
    """``clusters ignore`` (or ``unignore``). An ignored cluster's draft is not filed: an approved
    one goes back to pending, so taking the ignore back does not file a text approved before it.
    Taken back, the cluster's pending draft is re-rendered (it was not refreshed meanwhile)."""
    done = Correction()
    set_ignored(warehouse, cluster_id, actor, ignored, reason)
    if ignored:
        drafted = _drafts_by_cluster(warehouse).get(cluster_id)
        if drafted is not None and drafted["status"] in _UNFILED:
            _note(warehouse, drafted, actor, "the cluster was ignored: this draft is not filed while it is", done)
    else:
        _follow_up(config, warehouse, {cluster_id: "the cluster is no longer ignored"}, actor, client, done)
    return done


def rebuild_clusters(config: Config, warehouse: Warehouse, embedder: Embedder, actor: str, dry_run: bool = False,
                     client: ChatClient | None = None, assist: StageAssist | None = None) -> tuple[Rebuild, Correction]:
    """``clusters rebuild`` and what follows for the drafts: a cluster the rebuild merged into a
    successor is treated as after a maintainer's merge (its draft superseded or taken over, a
    filed issue marked as the successor's duplicate); a dissolved cluster's unfiled draft is
    superseded by nothing; every other cluster's unfiled draft is re-rendered."""
    done = Correction()
    hint = "re-cluster with settings that keep the filed issue's reports together"

    def absorbed(lost: dict[int, int | None]) -> None:
        for old, into in lost.items():
            if into is not None:
                _absorbed(warehouse, [old], into, actor, "was merged by a rebuild into", hint, done)
        _supersede_dissolved(warehouse, [old for old, into in lost.items() if into is None], actor, done)

    result = rebuild(warehouse, embedder, config.clustering, actor, dry_run, then=absorbed, assist=assist)
    if not dry_run:
        live = [c for c, d in _drafts_by_cluster(warehouse).items() if d["status"] in _UNFILED]
        why = f"the clusters were rebuilt with clustering version {result.to_version}"
        _follow_up(config, warehouse, dict.fromkeys(live, why), actor, client, done)
    return result, done


def _supersede_dissolved(warehouse: Warehouse, dissolved: list[int], actor: str, done: Correction) -> None:
    """The unfiled drafts of clusters a rebuild dissolved: their reports are in no cluster now."""
    drafts = _drafts_by_cluster(warehouse)
    for cluster_id in dissolved:
        drafted = drafts.get(cluster_id)
        if drafted is None or drafted["status"] not in _UNFILED:
            continue  # a filed issue keeps its (now dissolved) cluster id and its comments
        warehouse.con.execute("UPDATE drafts SET status = 'superseded', updated_at = ? WHERE id = ?",
                              [now_utc(), drafted["id"]])
        record_action(warehouse, drafted["id"], "superseded", actor, {"why": f"cluster {cluster_id} was dissolved by a rebuild"})
        done.superseded.append((drafted["id"], None))


def _fate(drafted: dict[str, Any], survivor: dict[str, Any] | None, draftable: bool) -> str:
    """What happens to an absorbed cluster's draft (see the module docstring): ``duplicate``
    (both issues filed: it is closed as the survivor's duplicate), ``refused`` (filed, and the
    survivor has no filed issue), ``taken over`` (the survivor has no draft: this one becomes
    its draft), or ``superseded`` (never to be filed)."""
    if drafted["status"] == "filed":
        return "duplicate" if survivor is not None and survivor["status"] == "filed" else "refused"
    if survivor is None and draftable and drafted["status"] in _UNFILED:
        return "taken over"
    return "superseded"


def _draftable(warehouse: Warehouse, cluster_id: int) -> bool:
    """Only a problem or request cluster has a draft: one moved into praise is superseded by nothing."""
    (found,) = warehouse.con.execute("SELECT list_contains(?, polarity) FROM clusters WHERE id = ?",
                                     [list(DRAFTED), cluster_id]).fetchall()[0]
    return bool(found)


def merge_preview(warehouse: Warehouse, into: int, other: int) -> list[str]:
    """What :func:`merge_clusters` of ``other`` into ``into`` would do, in sentences, changing
    nothing: for a desk's confirmation step. Raises :class:`CorrectionError` for a merge that
    would be refused, with the same reason."""
    rows = {row[0]: row[1:] for row in warehouse.con.execute(
        """SELECT c.id, c.view, c.service, c.polarity, c.status, c.label, count(m.id), count(DISTINCT r.account)
           FROM clusters c LEFT JOIN cluster_members m ON m.cluster_id = c.id
           LEFT JOIN records r ON r.collector = m.collector AND r.id = m.id
           WHERE c.id IN (?, ?) GROUP BY ALL""", [into, other]).fetchall()}
    for cluster_id in (into, other):
        if cluster_id not in rows:
            raise CorrectionError(f"no cluster {cluster_id}")
        if rows[cluster_id][3] in ("merged", "dissolved"):
            raise CorrectionError(f"cluster {cluster_id} is {rows[cluster_id][3]}: act on the cluster it went into")
    if into == other:
        raise CorrectionError("a cluster cannot be merged into itself")
    for index, key in enumerate(("view", "service", "polarity")):
        if rows[into][index] != rows[other][index]:
            raise CorrectionError(f"clusters {into} and {other} differ in {key} ({rows[into][index]} vs "
                                  f"{rows[other][index]}): clusters never span services or polarities")
    reports, accounts = rows[other][5], rows[other][6]
    said = [f"cluster {other}'s {reports} report{'' if reports == 1 else 's'} ({accounts} account"
            f"{'' if accounts == 1 else 's'}) join cluster {into}, which keeps its name"
            + (f" \u201c{rows[into][4]}\u201d" if rows[into][4] else ""),
            f"cluster {other} is closed; its number leads to cluster {into} from now on"]
    drafts = _drafts_by_cluster(warehouse)
    survivor, drafted = drafts.get(into), drafts.get(other)
    if drafted is not None:
        fate = _fate(drafted, survivor, _draftable(warehouse, into))
        if fate == "refused":
            raise CorrectionError(f"cluster {other} has a filed issue ({drafted['issue_url']}) and cluster {into} has none: "
                                  f"merge the other way round so that the filed issue survives")
        said.append({
            "duplicate": f"issue {drafted['issue_url']} will be closed as a duplicate of {survivor and survivor['issue_url']} "
                         "by the next publish",
            "taken over": f"draft {drafted['id']} ({drafted['status']}) becomes cluster {into}'s draft and is re-rendered",
            "superseded": f"draft {drafted['id']} ({drafted['status']}) is superseded"
                          + (f" by draft {survivor['id']}" if survivor else "") + ": it will never be filed",
        }[fate])
    if survivor is not None:
        said.append(f"issue {survivor['issue_url']} is kept and gets the new figures" if survivor["status"] == "filed"
                    else f"draft {survivor['id']} ({survivor['status']}) is re-rendered with the merged reports"
                    + ("; approved, it goes back to pending" if survivor["status"] == "approved" else ""))
    said.append("you can undo the merge afterwards (the cluster page's history, or clusters undo)")
    return said


def _absorbed(warehouse: Warehouse, absorbed: list[int], into: int, actor: str, how: str, hint: str,
              done: Correction) -> None:
    """Inside the correction's transaction: the drafts of the clusters ``into`` absorbed. Refuses
    (rolling the correction back) when a filed issue would be left without its reports."""
    drafts = _drafts_by_cluster(warehouse)
    survivor = drafts.get(into)
    con, now = warehouse.con, now_utc()
    draftable = _draftable(warehouse, into)
    for cluster_id in absorbed:
        drafted = drafts.get(cluster_id)
        if drafted is None:
            continue
        why = {"why": f"cluster {cluster_id} {how} {into}", "was": drafted["status"]}
        fate = _fate(drafted, survivor, draftable)
        if fate == "refused":
            raise CorrectionError(
                f"cluster {cluster_id} has a filed issue ({drafted['issue_url']}) and cluster {into} has none: {hint}")
        if fate == "duplicate":
            assert survivor is not None
            con.execute("UPDATE drafts SET superseded_by = ?, updated_at = ? WHERE id = ?", [survivor["id"], now, drafted["id"]])
            record_action(warehouse, drafted["id"], "duplicate", actor,
                          {**why, "of": survivor["issue_url"], "github": "closed as a duplicate by the next publish"})
            record_action(warehouse, survivor["id"], "survived a merge", actor,
                          {"why": why["why"], "duplicate": drafted["issue_url"]})
            done.duplicates.append((drafted["issue_url"], survivor["issue_url"]))
        elif fate == "taken over":
            # The survivor has no draft: this one becomes its draft, its marker following.
            con.execute("UPDATE drafts SET cluster_id = ?, body = ?, updated_at = ? WHERE id = ?",
                        [into, MARKER_LINE.sub(marker(into), drafted["body"], count=1), now, drafted["id"]])
            record_action(warehouse, drafted["id"], "taken over", actor, {**why, "cluster": into})
            done.taken_over.append((drafted["id"], into))
            survivor = {**drafted, "cluster_id": into}
        else:
            by = survivor["id"] if survivor else None
            con.execute("UPDATE drafts SET status = 'superseded', superseded_by = ?, updated_at = ? WHERE id = ?",
                        [by, now, drafted["id"]])
            record_action(warehouse, drafted["id"], "superseded", actor, {**why, "by_draft": by})
            done.superseded.append((drafted["id"], by))


def _follow_up(config: Config, warehouse: Warehouse, changed: dict[int, str], actor: str,
               client: ChatClient | None, done: Correction) -> None:
    """Re-render the unfiled drafts of the clusters whose members changed (``changed``: cluster →
    why, for the note); approved ones go back to pending first. Filed issues are the publishing
    stage's (a demand-update comment)."""
    drafts = _drafts_by_cluster(warehouse)
    wanted = [drafts[c] for c in changed if c in drafts and drafts[c]["status"] in _UNFILED]
    if not wanted:
        return
    figures = demand(warehouse, half_life_days=config.demand.half_life_days)
    by_cluster = {row["cluster_id"]: row for row in figures.iter_rows(named=True)}
    for drafted in wanted:
        _note(warehouse, drafted, actor, changed[drafted["cluster_id"]], done)
        row = by_cluster.get(drafted["cluster_id"])
        if row is None:
            continue  # no live report left (all dismissed): nothing to draft from
        if drafted["edited"]:
            done.kept.append(drafted["id"])
            continue
        inputs = draft_input(warehouse, row)
        draft = llm_draft(inputs, config.drafts, client) if client else template_draft(inputs, config.drafts)
        current = {**drafted, "status": "pending"}
        _store(warehouse, row, draft, current, _cited(inputs, draft, config.drafts))
        done.rerendered.append(drafted["id"])


def _note(warehouse: Warehouse, drafted: dict[str, Any], actor: str, why: str, done: Correction) -> None:
    """Record why the draft changes; an approved one goes back to pending, saying so."""
    with transaction(warehouse.con):
        if drafted["status"] == "approved":
            warehouse.con.execute("UPDATE drafts SET status = 'pending', updated_at = ? WHERE id = ?",
                                  [now_utc(), drafted["id"]])
            record_action(warehouse, drafted["id"], "back to pending", actor,
                          {"why": why, "note": "approved before the cluster changed: review it again"})
            done.reopened.append(drafted["id"])
        else:
            record_action(warehouse, drafted["id"], "cluster corrected", actor, {"why": why})


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids))
