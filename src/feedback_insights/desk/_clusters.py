"""The clusters' pages: the demand table (problems, requests and praise apart), one cluster
with its reports, and the corrections (merge, split, move, ignore, unignore, rename, undo, and
attaching a cluster to the issue it is possibly the same as): the library functions
``clusters …`` calls, recorded with the reviewer and the time, and followed through to the drafts.

A merge is never one click: the form chooses nothing by default, each choice shows its
reports, accounts, status and issue, and a confirmation page says what will change
(:func:`merge_preview`) before anything does. Merges, splits, moves and renames are undone from
the cluster's history."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Annotated, Any

import orjson
import polars as pl
from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BeforeValidator

from ..clusters import VIEWS, CorrectionError, demand
from ..clusters import history as cluster_history
from ..config import Config
from ..drafts import (
    ChatClient,
    Correction,
    DraftError,
    Turn,
    cluster_drafts,
    draft_cluster,
    ignore_cluster,
    merge_clusters,
    merge_preview,
    move_records,
    rename_cluster,
    split_cluster,
    turn,
    undo_correction,
)
from ..warehouse import Warehouse
from . import _forms
from ._errors import BadInput, NotFound, Refused
from ._pages import page as render
from ._pages import web_link
from ._possibly import possibly
from ._security import Posted, session_of

router = APIRouter()

ClusterId = Annotated[int, BeforeValidator(_forms.path_id), Path(ge=1, le=_forms.MAX_ID)]
#: The statuses the table filters on; "" is every live one but the ignored (as ``clusters list``).
STATUSES = ("open", "ignored", "fixed", "wont_fix", "all")

_CLUSTER = """SELECT id, view, status, merged_into, label, given_name, service, polarity, confidence,
                     coalesce(needs_review, false) AS needs_review, config_version, medoid_collector, medoid_id
              FROM clusters WHERE id = ?"""
_REPORTS = """
SELECT r.collector, r.id, r.received_at, r.source, r.severity, r.outcome, r.account IS NULL AS anonymous,
       coalesce(r.summary, r.goal, '') AS summary, r.detail, r.status IS NOT DISTINCT FROM 'dismissed' AS dismissed,
       m.assigned_by, r.evidence, r.context
FROM cluster_members m JOIN records r USING (collector, id)
WHERE m.cluster_id = ? ORDER BY r.received_at DESC, r.id
"""
#: Where this cluster's reports may go or come from: live clusters of its view and service,
#: with what a reviewer chooses by (reports, accounts, status, issue or draft), most accounts first.
_NEIGHBOURS = """
SELECT c.id, c.polarity, c.label, c.status, count(m.id) AS reports, count(DISTINCT r.account) AS accounts,
       (SELECT d.issue_number FROM drafts d WHERE d.cluster_id = c.id AND d.status = 'filed' ORDER BY d.id LIMIT 1) AS issue,
       (SELECT d.status FROM drafts d WHERE d.cluster_id = c.id ORDER BY d.id DESC LIMIT 1) AS draft
FROM clusters c
LEFT JOIN cluster_members m ON m.cluster_id = c.id
LEFT JOIN records r ON r.collector = m.collector AND r.id = m.id
WHERE c.view = ? AND c.service IS NOT DISTINCT FROM ? AND c.id <> ? AND c.status NOT IN ('merged', 'dissolved')
GROUP BY ALL ORDER BY accounts DESC, c.id
"""
#: The first report a form names (``collector:id``, or an id alone) that is not exactly one
#: member of the cluster, and how many members it names.
_NOT_OWNED = """
SELECT r.ref, count(m.id) AS matches
FROM (SELECT DISTINCT unnest($refs) AS ref) r
LEFT JOIN cluster_members m ON m.cluster_id = $cluster AND r.ref IN (m.id, m.collector || ':' || m.id)
GROUP BY r.ref HAVING count(m.id) <> 1
ORDER BY list_position($refs, r.ref) LIMIT 1
"""
#: The most reports one cluster page lists.
REPORTS_SHOWN = 500
#: The kinds of cluster (their polarity) the desk lists apart, in this order, with their
#: headings; a polarity not named here follows under its own name.
KINDS = {"problem": "Problems", "request": "Requests", "praise": "Praise"}
#: A cluster's filed issue, the one an attach merges into.
_FILED = "SELECT issue_number, issue_url FROM drafts WHERE cluster_id = ? AND status = 'filed' ORDER BY id LIMIT 1"


def by_kind(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``rows`` (each with a ``polarity``) in one list per kind, headed, in :data:`KINDS`' order
    then any other polarity's; each list keeps the rows' order, and no list is empty."""
    kinds = [*KINDS, *sorted({row["polarity"] for row in rows} - set(KINDS))]
    return [(KINDS.get(kind, kind.capitalize()), chosen) for kind in kinds
            if (chosen := [row for row in rows if row["polarity"] == kind])]


@router.get("/clusters")
def table(request: Request, view: str = "reports", status: str = "", service: str = "", review: str = "") -> Response:
    """The demand table, one per kind (problems, requests, praise): distinct accounts this week,
    last week and in all, reports, trend, confidence, the cluster's issue, and the issue it is
    possibly the same as."""
    chosen_view = _forms.choice("view", view, VIEWS) or "reports"
    chosen = _forms.choice("status", status, STATUSES)
    needs = _forms.choice("review", review, ("yes", "no"))
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        frame = demand(warehouse, view=chosen_view, half_life_days=desk.config.demand.half_life_days)
        drafts = cluster_drafts(warehouse)
        hints = possibly(warehouse, desk.config)
    week = frame["week"][0] if frame.height else None
    services = sorted(s for s in frame["service"].unique().to_list() if s) if frame.height else []
    if frame.height:
        if chosen is None:
            frame = frame.filter(pl.col("status") != "ignored")
        elif chosen != "all":
            frame = frame.filter(pl.col("status") == chosen)
        if service:
            frame = frame.filter(pl.col("service") == service)
        if needs is not None:
            frame = frame.filter(pl.col("needs_review") == (needs == "yes"))
        frame = frame.join(drafts, on="cluster_id", how="left", maintain_order="left")
    rows = [row | {"issue_link": web_link(row.get("issue_url")), "possibly": hints.get(row["cluster_id"], [])}
            for row in frame.to_dicts()]
    return render(request, "clusters.html.j2", kinds=by_kind(rows), shown=len(rows), week=week, services=services, views=VIEWS,
                  statuses=STATUSES, chosen={"view": chosen_view, "status": status, "service": service, "review": review})


@router.get("/clusters/{cluster_id}")
def cluster(request: Request, cluster_id: ClusterId) -> Response:
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        found = _cluster(warehouse, cluster_id)
        if found["status"] == "merged" and found["merged_into"] is not None:
            session_of(request).flash.append(f"cluster {cluster_id} was merged into {found['merged_into']}")
            return RedirectResponse(f"/clusters/{found['merged_into']}", status_code=303)
        figures = demand(warehouse, view=found["view"], half_life_days=desk.config.demand.half_life_days).filter(
            cluster_id=cluster_id)
        drafted = cluster_drafts(warehouse).filter(cluster_id=cluster_id).to_dicts()
        reports = _rows(warehouse, _REPORTS, [cluster_id])
        neighbours = _rows(warehouse, _NEIGHBOURS, [found["view"], found["service"], cluster_id])
        actions = cluster_history(warehouse, cluster_id)
        hints = possibly(warehouse, desk.config).get(cluster_id, [])
    return render(
        request, "cluster.html.j2", cluster=found, figures=figures.row(0, named=True) if figures.height else None,
        drafts=[d | {"issue_link": web_link(d["issue_url"])} for d in drafted],
        reports=[r | {"turn": _turn(r)} for r in reports[:REPORTS_SHOWN]], more=max(0, len(reports) - REPORTS_SHOWN),
        actions=actions, possibly=hints,
        mergeable=[n | {"choice": _choice(n)} for n in neighbours if n["polarity"] == found["polarity"]],
        targets=[n | {"choice": _choice(n, found["polarity"])} for n in neighbours],
    )


def _choice(neighbour: dict[str, Any], polarity: str | None = None) -> str:
    """One cluster as a merge or move choice reads: "12 · name — 9 reports, 5 accounts, open, issue #503"."""
    kind = f" ({neighbour['polarity']})" if polarity is not None and neighbour["polarity"] != polarity else ""
    where = f"issue #{neighbour['issue']}" if neighbour["issue"] is not None else (
        f"draft {neighbour['draft']}" if neighbour["draft"] else "no draft")
    reports, accounts = neighbour["reports"], neighbour["accounts"]
    return (f"{neighbour['id']} \u00b7 {neighbour['label'] or '(unnamed)'}{kind} \u2014 {reports} report{'' if reports == 1 else 's'}, "
            f"{accounts} account{'' if accounts == 1 else 's'}, {neighbour['status']}, {where}")


def _turn(report: dict[str, Any]) -> Turn | None:
    """The turn an in-session report is about (None for most agent reports), as the draft shows it."""
    parsed = {key: orjson.loads(report[key]) if isinstance(report[key], str) else report[key]
              for key in ("evidence", "context")}
    return turn({key: value if isinstance(value, dict) else None for key, value in parsed.items()})


@router.post("/clusters/{cluster_id}/merge")
def merge(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """Without ``confirm``: the confirmation page, saying what the merge will change (nothing
    changes yet). With it: the merge."""
    if not _forms.single(form, "other"):
        raise BadInput("other", "choose the cluster to merge into this one", back=f"/clusters/{cluster_id}")
    other, why = _forms.identifier(form, "other"), _forms.reason(form)
    if _forms.single(form, "confirm") != "yes":
        desk = request.app.state.desk
        with desk.turns.open() as warehouse:
            found = _cluster(warehouse, cluster_id)
            try:
                said = merge_preview(warehouse, cluster_id, other)
            except CorrectionError as exc:
                raise Refused(str(exc), back=f"/clusters/{cluster_id}") from None
            absorbed = _rows(warehouse, _CLUSTER, [other])[0]
        return render(request, "merge.html.j2", cluster=found, other=absorbed, said=said, reason=why or "")
    return _correct(request, cluster_id, lambda c, w, who, llm: merge_clusters(c, w, cluster_id, other, who, why, llm),
                    lambda done: f"merged cluster {other} into {cluster_id} (correction #{done.action}: "
                                 "undo it from the history below)")


@router.post("/clusters/{cluster_id}/split")
def split(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """The ticked reports into a new cluster, whose page follows: named, with its draft button."""
    chosen, why = _forms.records(form), _forms.reason(form)
    made: list[str] = []  # the new cluster's name, read in the warehouse's turn

    def split_then_named(config: Config, warehouse: Warehouse, who: str, llm: ChatClient | None) -> Correction:
        done = split_cluster(config, warehouse, cluster_id, chosen, who, why, llm)
        made.append(_cluster(warehouse, done.new_cluster or 0)["label"] or "(unnamed)")
        return done

    return _correct(request, cluster_id, split_then_named,
                    lambda done: f"split {len(chosen)} reports off cluster {cluster_id} into this new cluster "
                                 f"{done.new_cluster}, named \u201c{made[0]}\u201d: draft it, rename it, or undo the "
                                 f"split (correction #{done.action}) below",
                    then=lambda done: done.new_cluster)


@router.post("/clusters/{cluster_id}/move")
def move(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """The ticked reports of this cluster into another: the cluster in the URL must own every
    one (the library moves reports from anywhere, as ``clusters move`` names them)."""
    if not _forms.single(form, "to"):
        raise BadInput("to", "choose the cluster to move the ticked reports to", back=f"/clusters/{cluster_id}")
    chosen, to, why = _forms.records(form), _forms.identifier(form, "to"), _forms.reason(form)

    def owned_then_moved(config: Config, warehouse: Warehouse, who: str, llm: ChatClient | None) -> Correction:
        _owned(warehouse, cluster_id, chosen)
        return move_records(config, warehouse, chosen, to, who, why, llm)

    return _correct(request, cluster_id, owned_then_moved,
                    lambda done: f"moved {len(chosen)} reports into cluster {to} (correction #{done.action}: "
                                 f"undo it from cluster {to}'s history)")


@router.post("/clusters/{cluster_id}/ignore")
def ignore(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    why = _forms.reason(form)
    return _correct(request, cluster_id, lambda c, w, who, llm: ignore_cluster(c, w, cluster_id, who, True, why, llm),
                    lambda _: f"ignored cluster {cluster_id}")


@router.post("/clusters/{cluster_id}/unignore")
def unignore(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    why = _forms.reason(form)
    return _correct(request, cluster_id, lambda c, w, who, llm: ignore_cluster(c, w, cluster_id, who, False, why, llm),
                    lambda _: f"cluster {cluster_id} is open again")


@router.post("/clusters/{cluster_id}/attach")
def attach(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """"Attach to #503" instead of filing: this cluster merged into ``into``, a cluster with a
    filed issue (:func:`merge_clusters`: its reports count for that issue from now on, its own
    draft is superseded, nothing new is filed). Refused when ``into`` has no filed issue."""
    into, why = _forms.identifier(form, "into"), _forms.reason(form)
    issue: list[str] = []  # the issue's name, once read in the warehouse's turn

    def filed_then_merged(config: Config, warehouse: Warehouse, who: str, llm: ChatClient | None) -> Correction:
        filed = _rows(warehouse, _FILED, [into])
        if not filed:
            raise CorrectionError(f"cluster {into} has no filed issue to attach to: merge the clusters instead")
        number, url = filed[0]["issue_number"], filed[0]["issue_url"]
        issue.append(f"#{number}" if number is not None else url)
        return merge_clusters(config, warehouse, into, cluster_id, who, why or f"possibly the same as {issue[0]}", llm)

    return _correct(request, cluster_id, filed_then_merged, lambda _: f"attached cluster {cluster_id} to {issue[0]}: "
                    f"its reports are cluster {into}'s now, and nothing new is filed", then=lambda _: into)


@router.post("/clusters/{cluster_id}/rename")
def rename(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """A maintainer's name, kept over every later naming; "rule" hands it back to the naming rule."""
    back = _forms.single(form, "rule") == "yes"
    name = None if back else _forms.text(form, "name", 400, required=True, one_line=True)
    return _correct(request, cluster_id, lambda c, w, who, llm: rename_cluster(c, w, cluster_id, name, who, llm),
                    lambda done: (f"cluster {cluster_id} is named by the rule again" if back else
                                  f"named cluster {cluster_id} \u201c{' '.join((name or '').split())}\u201d: "
                                  "no re-naming replaces it") + f" (correction #{done.action})")


@router.post("/clusters/{cluster_id}/undo")
def undo(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """Take back one correction of this cluster's history (by its number)."""
    action, why = _forms.number(form, "action"), _forms.reason(form)

    def listed_then_undone(config: Config, warehouse: Warehouse, who: str, llm: ChatClient | None) -> Correction:
        if all(a.id != action for a in cluster_history(warehouse, cluster_id)):
            raise CorrectionError(f"correction #{action} is not in cluster {cluster_id}'s history")
        return undo_correction(config, warehouse, action, who, why, llm)

    return _correct(request, cluster_id, listed_then_undone, lambda _: f"undid correction #{action}")


@router.post("/clusters/{cluster_id}/draft")
def draft(request: Request, cluster_id: ClusterId, form: Posted) -> Response:
    """``drafts create``: a cluster the drafting stage leaves (it needs review, or has too few
    accounts yet) drafted because a reviewer looked at it."""
    desk = request.app.state.desk
    who = desk.access.reviewer(session_of(request))
    with _llm(desk.config) as client, desk.turns.open() as warehouse:
        _cluster(warehouse, cluster_id)
        try:
            draft_id = draft_cluster(desk.config, warehouse, cluster_id, who, client)
        except DraftError as exc:
            raise Refused(str(exc), back=f"/clusters/{cluster_id}") from None
    session_of(request).flash = [f"drafted cluster {cluster_id} as draft {draft_id}: review it here"]
    return RedirectResponse(f"/drafts/{draft_id}", status_code=303)


Action = Callable[[Any, Warehouse, str, ChatClient | None], Correction]


def _correct(request: Request, cluster_id: int, action: Action, headline: Callable[[Correction], str],
             then: Callable[[Correction], int | None] | None = None) -> Response:
    """Run a correction as ``clusters …`` does (LLM-assisted re-rendering when ``[llm]`` is
    configured), then show what it did to the drafts on the cluster's page (``then``'s when
    given: the cluster it went into, or made)."""
    desk = request.app.state.desk
    who = desk.access.reviewer(session_of(request))
    with _llm(desk.config) as client, desk.turns.open() as warehouse:
        _cluster(warehouse, cluster_id)
        try:
            done = action(desk.config, warehouse, who, client)
        except CorrectionError as exc:
            raise Refused(str(exc), back=f"/clusters/{cluster_id}") from None
    session_of(request).flash = [headline(done), *done.lines()]
    return RedirectResponse(f"/clusters/{(then(done) if then else None) or cluster_id}", status_code=303)


def _llm(config: Config) -> AbstractContextManager[ChatClient | None]:
    """The configured LLM's client for the drafts a correction re-renders, closed after; none
    without ``[llm]``."""
    return ChatClient(config.llm) if config.llm else nullcontext()


def _cluster(warehouse: Warehouse, cluster_id: int) -> dict[str, Any]:
    found = _rows(warehouse, _CLUSTER, [cluster_id])
    if not found:
        raise NotFound(f"no cluster {cluster_id}", back="/clusters")
    return found[0]


def _owned(warehouse: Warehouse, cluster_id: int, refs: list[str]) -> None:
    """Refuses (409, nothing changed) a report named that is not a member of ``cluster_id``;
    an id alone must name one member, as the library resolves it."""
    for ref, matches in warehouse.con.execute(_NOT_OWNED, {"cluster": cluster_id, "refs": refs}).fetchall():  # 0 or 1
        shown = ref if len(ref) <= 80 else ref[:79] + "…"
        why = "is ambiguous (write collector:id)" if matches else f"is not a member of cluster {cluster_id}"
        raise CorrectionError(f"{shown} {why}: nothing was moved")


def _rows(warehouse: Warehouse, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = warehouse.con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
