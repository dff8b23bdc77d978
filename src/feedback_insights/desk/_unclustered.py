"""The reports in no cluster, so that none vanishes: counted per service and listed, each with
why it is alone (:func:`~feedback_insights.clusters.unclustered`), filtered by service."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..clusters import unclustered, unclustered_services
from ._pages import page

router = APIRouter()

#: The most reports the page lists (the counts are of all of them).
REPORTS_SHOWN = 500


@router.get("/unclustered")
def reports(request: Request, service: str = "") -> Response:
    """Every live report in no cluster, problems first, blocking ones first, newest first."""
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        services = unclustered_services(warehouse, examples=0).to_dicts()
        rows = unclustered(warehouse)
    names = sorted(s["service"] for s in services if s["service"])
    if service:
        rows = rows.filter(rows["service"] == service)
    listed = rows.head(REPORTS_SHOWN).to_dicts()
    return page(request, "unclustered.html.j2", services=services, names=names, reports=listed,
                total=rows.height, more=max(0, rows.height - REPORTS_SHOWN), chosen={"service": service})
