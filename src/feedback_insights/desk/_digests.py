"""Every week's digest: the weeks that have reports, each week's digest as the Markdown the
chat channel gets (rendered as GitHub renders it), and the HTML digest as emailed. The cards
link to this desk's own pages of their cluster and draft."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, Response

from ..core import now_utc
from ..digest import Digest, DigestError, Week, build, chosen_week, render, safe_url
from ..warehouse import Warehouse
from ._errors import BadInput, NotFound
from ._pages import gfm, page

router = APIRouter()

WeekName = Annotated[str, Path(max_length=10)]
#: An ISO week as the desk links to it, in ASCII digits (``Week.parse`` takes any script's
#: digits and a trailing newline).
_WEEK = re.compile(r"[0-9]{4}-W[0-9]{2}")
#: The HTML digest is a document of its own (styles in attributes, as email clients need, and
#: inline SVG charts): its styles are allowed inline, and ``sandbox`` keeps it script-less and
#: of no origin, whatever it holds.
DIGEST_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'none'; "
              "frame-ancestors 'none'; base-uri 'none'; sandbox")
_WEEKS = """
SELECT date_trunc('week', received_at) AS monday, count(*) AS reports
FROM records GROUP BY ALL ORDER BY monday DESC
"""


@router.get("/digests")
def weeks(request: Request) -> Response:
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        found = _weeks(warehouse)
    complete = Week.before(now_utc())
    return page(request, "digests.html.j2", weeks=[(week, reports, (week.year, week.number) > (complete.year,
                complete.number)) for week, reports in found.items()])


@router.get("/digests/{week}")
def digest(request: Request, week: WeekName) -> Response:
    built = _digest(request, week)
    return page(request, "digest.html.j2", week=built.week, body=gfm(render(built, "md")))


@router.get("/digests/{week}/html")
def digest_html(request: Request, week: WeekName) -> Response:
    return HTMLResponse(render(_digest(request, week), "html"), headers={"Content-Security-Policy": DIGEST_CSP})


def _digest(request: Request, name: str) -> Digest:
    week = _week(name)
    try:
        chosen_week(str(week))  # one that has not begun is the CLI's error, as a missing page
    except DigestError as exc:
        raise NotFound(str(exc).removeprefix("--week: "), back="/digests") from None
    desk = request.app.state.desk
    with desk.turns.open() as warehouse:
        if str(week) not in {str(w) for w in _weeks(warehouse)}:
            raise NotFound(f"no reports in {week}", back="/digests")
        try:
            return build(warehouse, week, desk.config.demand.half_life_days, desk_url=_base(request))
        except DigestError as exc:
            raise BadInput("week", str(exc), back="/digests") from None


def _week(name: str) -> Week:
    """``name`` as a week, written in ASCII digits."""
    try:
        if _WEEK.fullmatch(name):
            return Week.parse(name)
    except ValueError:
        pass
    raise BadInput("week", f"expected an ISO week like 2026-W48 (got {name[:12]!r})", back="/digests")


def _base(request: Request) -> str | None:
    """This desk's address as the reader reached it, for the cards' links; None (no links)
    when the Host it was reached by is no plain host and port."""
    return safe_url(str(request.base_url).rstrip("/"))


def _weeks(warehouse: Warehouse) -> dict[Week, int]:
    """The ISO weeks with reports, newest first, and how many each has."""
    found: dict[Week, int] = {}
    for monday, reports in warehouse.con.execute(_WEEKS).fetchall():
        year, number, _ = monday.isocalendar()
        found[Week(year, number)] = reports
    return found
