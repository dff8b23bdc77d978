"""The drafts' pages: the queue (problems and requests apart), one draft as GitHub will show it
beside its evidence and history, and the review actions. Every action is the library function
``drafts …`` calls. A draft whose problem an issue already tracks says so, with the evidence and
a form to attach it instead (:mod:`._possibly`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BeforeValidator

from ..clusters import demand
from ..config import EvidenceLinks
from ..drafts import (
    DRAFT_STATUSES,
    EVIDENCE_FIELDS,
    MAX_BODY,
    MAX_TITLE,
    MAX_WORKAROUND,
    ReviewError,
    approve,
    draft_input,
    get_draft,
    history,
    list_drafts,
    reject,
    save_fields,
)
from ..warehouse import Warehouse
from . import _forms
from ._clusters import by_kind
from ._errors import BadInput, NotFound, Refused
from ._pages import gfm, page, web_link
from ._possibly import possibly
from ._security import Posted, session_of

router = APIRouter()
T = TypeVar("T")

DraftId = Annotated[int, BeforeValidator(_forms.path_id), Path(ge=1, le=_forms.MAX_ID)]
#: The longest labels field read (the library checks each label).
LABELS_CHARS = 2000
#: The most reports the evidence column lists (the rest are counted).
EVIDENCE_SHOWN = 50
QUOTE_CHARS = 600
#: Each draft's cluster's kind (polarity), by which the queue lists them apart.
_KINDS = "SELECT id AS cluster_id, polarity FROM clusters"


@router.get("/drafts")
def queue(request: Request, service: str = "", status: str = "", review: str = "") -> Response:
    """One list per kind of cluster (problems, requests), pending first, then by their
    cluster's distinct accounts; filtered by service, status and whether the cluster needs
    review; a draft possibly the same as a filed issue is marked."""
    chosen = _forms.choice("status", status, DRAFT_STATUSES)
    needs = _forms.choice("review", review, ("yes", "no"))
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        drafts = list_drafts(warehouse, chosen, desk.config.demand.half_life_days)
        rows = drafts.join(warehouse.con.sql(_KINDS).pl(), on="cluster_id", how="left", maintain_order="left").to_dicts()
        hints = possibly(warehouse, desk.config)
    services = sorted({r["service"] for r in rows if r["service"]})
    shown = [r | {"possibly": hints.get(r["cluster_id"], [])} for r in rows if (not service or r["service"] == service)
             and (needs is None or r["needs_review"] == (needs == "yes"))]
    return page(request, "drafts.html.j2", kinds=by_kind(shown), shown=len(shown), total=len(rows), services=services, statuses=DRAFT_STATUSES,
                chosen={"service": service, "status": status, "review": review})


@router.get("/drafts/{draft_id}")
def draft(request: Request, draft_id: DraftId) -> Response:
    return _page(request, draft_id)


def _page(request: Request, draft_id: int, status: int = 200, errors: dict[str, str] | None = None) -> Response:
    """The draft's page: the decision first (figures, status, Approve, Edit, Reject), then the
    issue as GitHub will show it, its evidence and history; ``errors`` (field → message) shows
    a refused form again with what was wrong."""
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        found = _draft(warehouse, draft_id)
        actions = history(warehouse, draft_id)
        figures = demand(warehouse, half_life_days=desk.config.demand.half_life_days).filter(cluster_id=found["cluster_id"])
        inputs = draft_input(warehouse, figures.row(0, named=True)) if figures.height else None
        hints = possibly(warehouse, desk.config).get(found["cluster_id"], [])
    reports = inputs.reports if inputs else []
    return page(
        request, "draft.html.j2", draft=found, body=gfm(found["body"]), actions=actions,
        figures=figures.row(0, named=True) if figures.height else None,
        evidence=[_evidence(r, desk.config.drafts.links) for r in reports[:EVIDENCE_SHOWN]],
        more=max(0, len(reports) - EVIDENCE_SHOWN), issue_url=web_link(found["issue_url"]),
        limits={"title": MAX_TITLE, "workaround": MAX_WORKAROUND, "body": MAX_BODY}, possibly=hints,
        errors=errors or {}, status=status,
    )


@router.post("/drafts/{draft_id}/approve")
def approve_draft(request: Request, draft_id: DraftId, form: Posted) -> Response:
    _decide(request, draft_id, lambda w, who: approve(w, draft_id, who))
    return _done(request, draft_id, f"approved draft {draft_id}: the next publish files it")


@router.post("/drafts/{draft_id}/reject")
def reject_draft(request: Request, draft_id: DraftId, form: Posted) -> Response:
    try:
        why = _forms.reason(form, required=True) or ""
    except BadInput as exc:  # the form again, saying what to fix, not an error page
        blank = not _forms.single(form, "reason").strip()
        said = "reason: say why you reject it; the next maintainer reads it" if blank else str(exc)
        return _page(request, draft_id, 400, {"reason": said})
    _decide(request, draft_id, lambda w, who: reject(w, draft_id, who, why))
    return _done(request, draft_id, f"rejected draft {draft_id}")


@router.post("/drafts/{draft_id}/edit")
def edit_draft(request: Request, draft_id: DraftId, form: Posted) -> Response:
    """The form's fields saved by the function ``drafts edit`` saves through, field by field
    (never through the editor's text form, which a field holding its separator would break):
    it checks them, keeps the cluster marker and records what changed."""
    fields = {
        "title": _forms.text(form, "title", MAX_TITLE, required=True, one_line=True),
        "labels": [label for label in _forms.text(form, "labels", LABELS_CHARS, one_line=True).split(",")
                   if label.strip()],
        "workaround": _forms.text(form, "workaround", MAX_WORKAROUND, one_line=True) or None,
        "body": _forms.text(form, "body", MAX_BODY, required=True),
    }
    changed = _decide(request, draft_id, lambda w, who: save_fields(w, draft_id, who, fields))
    return _done(request, draft_id, f"draft {draft_id}: changed {', '.join(changed)}" if changed else "no change")


def _decide(request: Request, draft_id: int, action: Callable[[Warehouse, str], T]) -> T:
    """``action(warehouse, reviewer)`` on an existing draft; the library's refusal is a 400 page
    when it names a field of the form (a label too long), else a 409 one (a draft in the
    wrong status)."""
    desk = request.app.state.desk
    who = desk.access.reviewer(session_of(request))
    with desk.turns.open() as warehouse:
        _draft(warehouse, draft_id)
        try:
            return action(warehouse, who)
        except ReviewError as exc:
            if exc.field is not None:
                raise BadInput(exc.field, str(exc).removeprefix(f"{exc.field}: "), back=f"/drafts/{draft_id}") from None
            raise Refused(str(exc), back=f"/drafts/{draft_id}") from None


def _done(request: Request, draft_id: int, line: str) -> Response:
    """Back to the draft's page (post-redirect-get), which says what was done."""
    session_of(request).flash = [line]
    return RedirectResponse(f"/drafts/{draft_id}", status_code=303)


def _draft(warehouse: Warehouse, draft_id: int) -> dict[str, Any]:
    try:
        return get_draft(warehouse, draft_id)
    except ReviewError:
        raise NotFound(f"no draft {draft_id}", back="/drafts") from None


def _evidence(report: dict[str, Any], links: EvidenceLinks) -> dict[str, Any]:
    """One report as the evidence column shows it: its words (escaped by the template) and
    its pointers, linked through the configured URL templates."""
    values = EvidenceLinks.values(report)
    pointers = [{"name": name, "value": values[name], "url": web_link(links.url(name, values))}
                for name in EVIDENCE_FIELDS if name in values]
    words = report.get("summary") or report.get("goal") or ""
    detail = report.get("detail") if report.get("detail") != words else None
    return {
        "id": report["id"], "collector": report["collector"], "received_at": report["received_at"],
        "source": report.get("source"), "severity": report.get("severity"), "outcome": report.get("outcome"),
        "summary": _clip(words), "detail": _clip(detail or ""), "pointers": pointers,
        "private": bool(report.get("private")),
    }


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"
