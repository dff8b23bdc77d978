"""Demand per cluster, in DuckDB SQL: how many distinct accounts hit it, and how it moves.

Like Sentry's "users affected", demand is counted by distinct (pseudonymised) accounts: one
agent retrying twenty times is one account. Figures are computed "as of" an instant; by default
the newest report in the warehouse, so the same data always gives the same figures.

Ranking score: the sum, over the distinct accounts in a cluster, of
``severity weight × 0.5 ** (days since that account's latest report / half_life_days)`` where the
weight of an account is that of its most severe report: 3 when blocking (severity ``blocking``
or outcome ``blocked``), 2 high, 1 medium or unknown, 0.5 low. Reports without an account are
counted (``anonymous_reports``) but add nothing to the score: they cannot be told apart.

Trend: ``new`` when first seen in the last 7 days; ``rising`` when the last 14 days hold at
least 3 reports and at least twice the mean 14-day count of the 6 weeks before; else ``steady``.
A cluster whose issue was fixed and which has reports after the fix is a ``regression``.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from ..config import DEFAULT_HALF_LIFE_DAYS
from ..warehouse import Warehouse

_DEMAND = """
WITH members AS (
    SELECT m.cluster_id, r.account, r.session_id, r.tool, r.method, r.received_at, r.lane,
           r.category, r.severity, r.outcome, s.sentiment, s.specificity,
           CASE WHEN r.severity = 'blocking' OR r.outcome = 'blocked' THEN 3.0
                WHEN r.severity = 'high' THEN 2.0
                WHEN r.severity = 'low' THEN 0.5
                ELSE 1.0 END AS weight
    FROM cluster_members m
    JOIN records r USING (collector, id)
    LEFT JOIN record_signals s USING (collector, id)
    WHERE m.view = $view AND m.cluster_id IS NOT NULL AND r.received_at <= $as_of
), per_account AS (
    SELECT cluster_id, account, max(weight) AS weight, max(received_at) AS latest
    FROM members WHERE account IS NOT NULL GROUP BY ALL
), score AS (
    SELECT cluster_id,
           sum(weight * pow(0.5, date_diff('second', latest, $as_of) / 86400.0 / $half_life)) AS score
    FROM per_account GROUP BY ALL
), figures AS (
    SELECT cluster_id,
        count(DISTINCT account) AS accounts,
        count(DISTINCT account) FILTER (WHERE received_at > $as_of - INTERVAL 7 DAY) AS accounts_this_week,
        count(DISTINCT account) FILTER (WHERE received_at > $as_of - INTERVAL 14 DAY
                                          AND received_at <= $as_of - INTERVAL 7 DAY) AS accounts_last_week,
        count(*) AS reports,
        count(*) FILTER (WHERE account IS NULL) AS anonymous_reports,
        count(DISTINCT session_id) AS sessions,
        coalesce(list(DISTINCT tool ORDER BY tool) FILTER (WHERE tool IS NOT NULL), []) AS tools,
        min(received_at) AS first_seen,
        max(received_at) AS last_seen,
        histogram(lane) AS lanes,
        histogram(category) AS categories,
        histogram(coalesce(severity, 'unknown')) AS severities,
        histogram(coalesce(outcome, 'unknown')) AS outcomes,
        count(*) FILTER (WHERE weight = 3.0) AS blocking_reports,
        avg(sentiment) AS mean_sentiment,
        avg(specificity) AS mean_specificity,
        count(*) FILTER (WHERE received_at > $as_of - INTERVAL 14 DAY) AS reports_last_14_days,
        count(*) FILTER (WHERE received_at > $as_of - INTERVAL 56 DAY
                           AND received_at <= $as_of - INTERVAL 14 DAY) AS reports_6_weeks_before
    FROM members GROUP BY cluster_id
)
SELECT c.id AS cluster_id, c.service, c.polarity, c.status, c.label, f.* EXCLUDE (cluster_id),
    CASE WHEN f.first_seen > $as_of - INTERVAL 7 DAY THEN 'new'
         WHEN f.reports_last_14_days >= 3
          AND f.reports_last_14_days >= 2 * f.reports_6_weeks_before / 3.0 THEN 'rising'
         ELSE 'steady' END AS trend,
    c.status = 'fixed' AND f.last_seen > c.fixed_at AS regression,
    round(coalesce(s.score, 0), 3) AS score
FROM figures f
JOIN clusters c ON c.id = f.cluster_id
LEFT JOIN score s USING (cluster_id)
WHERE c.status <> 'merged'
ORDER BY score DESC, accounts DESC, reports DESC, cluster_id
"""


def latest_report(warehouse: Warehouse) -> datetime | None:
    return warehouse.con.execute("SELECT max(received_at) FROM records").fetchall()[0][0]


def demand(
    warehouse: Warehouse, as_of: datetime | None = None, view: str = "reports", half_life_days: float = DEFAULT_HALF_LIFE_DAYS
) -> pl.DataFrame:
    """One row per live cluster of ``view``, highest ranking score first."""
    as_of = as_of or latest_report(warehouse)
    if as_of is None:
        return pl.DataFrame()
    params = {"view": view, "as_of": as_of, "half_life": half_life_days}
    return warehouse.con.sql(_DEMAND, params=params).pl()
