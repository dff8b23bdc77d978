"""Quoting one owner-private report into its cluster's draft, on purpose: the form beside a
private report's evidence, and the action, which is the library's
:func:`~feedback_insights.drafts.quote_report` (who: the desk's reviewer; why: the form's
reason, required)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BeforeValidator

from ..drafts import QuoteError, quote_report
from . import _forms
from ._errors import BadInput, Refused
from ._security import Posted, session_of

router = APIRouter()

DraftId = Annotated[int, BeforeValidator(_forms.path_id), Path(ge=1, le=_forms.MAX_ID)]
#: The longest collector name or record id the form sends back.
ID_CHARS = 256


@router.post("/drafts/{draft_id}/quote")
def quote(request: Request, draft_id: DraftId, form: Posted) -> Response:
    """Quote the report the form names, recorded with the reviewer and the reason."""
    back = f"/drafts/{draft_id}"
    collector = _forms.text(form, "collector", ID_CHARS, required=True, one_line=True)
    record_id = _forms.text(form, "id", ID_CHARS, required=True, one_line=True)
    why = _forms.reason(form, required=True) or ""
    if not why.strip():
        raise BadInput("reason", "say why this owner's words must be quoted; the record keeps it", back=back)
    desk = request.app.state.desk
    who = desk.access.reviewer(session_of(request))
    with desk.turns.open() as warehouse:
        try:
            done = quote_report(warehouse, desk.config.drafts, draft_id, collector, record_id, who, why,
                                desk.config.demand.half_life_days)
        except QuoteError as exc:
            raise Refused(str(exc), back=back) from None
    session_of(request).flash = [f"quoted {collector}:{record_id} into draft {draft_id}"
                                 + ("" if done.rendered else " (the body was edited by hand: add the words yourself)")]
    return RedirectResponse(back, status_code=303)
