"""The reports in no cluster, so that nothing vanishes from what people read.

A report the clustering leaves alone is in no cluster, so in no draft and no card of the
digest; a complaint nobody else made in the same words (or that only one agent keeps making in
words the model does not hold together) would be read by no one. Every reader lists them:
``clusters list --unclustered``, the desk's "Unclustered" page and the digest's count with a
few examples per service. They are read here, in one query.

Only the reports view has them: every report is in it (a goal in no theme is still a report,
in its cluster or listed here). Reports dismissed in triage are left out, as from demand. Each
says why it is in no cluster (``why``):

- ``no near duplicate``: embedded, but no other report of its service and polarity is near it;
- ``too few words``: too little text of its own to embed (``it didn't work``);
- ``no service``: it names no service, and clusters never span services;
- ``not clustered yet``: stored after the last clustering run.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import polars as pl

from ..warehouse import Warehouse

#: The reasons a report is in no cluster, in the order of the module docstring.
WHY = ("no near duplicate", "too few words", "no service", "not clustered yet")
#: How many reports each service shows in a summary (:func:`unclustered_services`).
EXAMPLES = 3

_UNCLUSTERED = f"""
SELECT r.collector, r.id, r.service, r.received_at, r.source, r.dialect, r.rating, r.lane, r.category,
       r.severity, r.outcome, r.account, r.severity = 'blocking' OR r.outcome = 'blocked' AS blocking,
       coalesce(r.summary, r.goal, r.detail, '') AS summary, r.detail,
       CASE WHEN m.id IS NOT NULL AND m.text_sha256 IS NOT NULL THEN '{WHY[0]}'
            WHEN m.id IS NOT NULL THEN '{WHY[1]}'
            WHEN r.service IS NULL THEN '{WHY[2]}'
            ELSE '{WHY[3]}' END AS why
FROM records r
LEFT JOIN cluster_members m ON m.view = 'reports' AND m.collector = r.collector AND m.id = r.id
WHERE (m.id IS NULL OR m.cluster_id IS NULL) AND r.status IS DISTINCT FROM 'dismissed'
  AND ($start::TIMESTAMPTZ IS NULL OR r.received_at >= $start)
  AND ($end::TIMESTAMPTZ IS NULL OR r.received_at < $end)
  AND ($sources::VARCHAR[] IS NULL OR list_contains($sources::VARCHAR[], r.source))
"""

#: Problems before praise, blocking ones first, then the newest: what a reader should see first.
_ORDER = "lane = 'positive_feedback', blocking DESC NULLS LAST, received_at DESC, collector, id"

_LISTED = f"SELECT * EXCLUDE (account), account IS NULL AS anonymous FROM ({_UNCLUSTERED}) ORDER BY {_ORDER}"

_SERVICES = f"""
SELECT service, count(*) AS reports, count(DISTINCT account) AS accounts,
       count(*) FILTER (WHERE blocking) AS blocking_reports,
       count(*) FILTER (WHERE lane <> 'positive_feedback') AS problem_reports,
       list({{'collector': collector, 'id': id, 'received_at': received_at, 'summary': summary, 'lane': lane,
              'severity': severity, 'outcome': outcome, 'source': source, 'dialect': dialect, 'rating': rating,
              'why': why}} ORDER BY {_ORDER})[1:$examples] AS examples
FROM ({_UNCLUSTERED})
GROUP BY service ORDER BY problem_reports DESC, reports DESC, service NULLS LAST
"""


def _params(start: datetime | None, end: datetime | None, sources: Sequence[str] | None) -> dict[str, object]:
    return {"start": start, "end": end, "sources": list(sources) if sources else None}


def unclustered(warehouse: Warehouse, start: datetime | None = None, end: datetime | None = None,
                sources: Sequence[str] | None = None) -> pl.DataFrame:
    """Every live report in no cluster (received in ``[start, end)`` when given; of those
    ``source`` values), problems first: its id, service, time, lane, severity, outcome, words
    (scrubbed, as stored), whether it is anonymous (never its account) and ``why``."""
    return warehouse.con.sql(_LISTED, params=_params(start, end, sources)).pl()


def unclustered_services(warehouse: Warehouse, start: datetime | None = None, end: datetime | None = None,
                         sources: Sequence[str] | None = None, examples: int = EXAMPLES) -> pl.DataFrame:
    """The same reports counted per service (``reports``, distinct ``accounts``,
    ``blocking_reports``, ``problem_reports``) with the first ``examples`` of each in the order
    :func:`unclustered` lists them; the service with most problem reports first."""
    return warehouse.con.sql(_SERVICES, params=_params(start, end, sources) | {"examples": examples}).pl()
