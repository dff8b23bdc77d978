"""Demand per cluster, in DuckDB SQL: how many distinct accounts hit it, and how it moves.

Like Sentry's "users affected", demand is counted by distinct (pseudonymised) accounts: one
agent retrying twenty times is one account. Figures are computed "as of" an instant; by default
the newest report in the warehouse, so the same data always gives the same figures.

**Dismissed reports** (a triage status an in-session source keeps: a person decided the report
is not a problem) count for nothing: not in accounts, reports, trend, score or blocking reports,
and so not in the drafting thresholds or the digest. They are counted apart
(``dismissed_reports``), and ``clusters show`` still lists them, marked.

**Who reported.** Accounts and reports are split by source tier
(:data:`~feedback_insights.core.vocabulary.SOURCE_TIERS`): ``accounts_agent`` / ``reports_agent``
(agent_authored, agent_solicited), ``…_runtime`` (server_observed, runtime_observed) and
``…_human`` (human_authored). One account can report in two tiers, so the three need not add up
to ``accounts``. ``sources=`` keeps only the reports of the given ``source`` values: every
figure, the score included, is then that tier's alone.

**Ranking score**: the sum, over the distinct accounts in a cluster, of
``weight × 0.5 ** (days since that account's latest report / half_life_days)``. The weight of
an account is that of its weightiest report, a report's weight being its severity weight
(3 blocking, i.e. severity ``blocking`` or outcome ``blocked``; 2 high; 1 medium or unknown;
0.5 low) times 1.5 when its wording is high-severity (RFC-026 ``severity_language = high``) and
times 1.5 when it states an expectation gap, so at most 3 × 2.25. Both factors are what the
signals say about demand itself: on the 3,579 real bug reports of
``../shared/data/bug_duplicates.jsonl`` the share that other reporters filed again (in a
duplicate group) is 4.5 % for reports with neither, 7.0 % with a gap only (×1.55), 7.9 % with
high-severity wording only (×1.75) and 10.8 % with both (×2.4), in both of its projects; 1.5
each, multiplied, is the round figure below both measured ratios. Only our own signals count
(``record_signals``), never a collector's ``nlp`` object; a report without signals (no comment)
keeps its severity weight. Reports without an account are counted (``anonymous_reports``) but
add nothing to the score: they cannot be told apart.

Trend: ``new`` when first seen in the last 7 days; ``rising`` when the last 14 days hold at
least 3 reports and at least twice the mean 14-day count of the 6 weeks before; else ``steady``.
A cluster whose issue was fixed and which has reports after the fix is a ``regression``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import polars as pl

from ..config import DEFAULT_HALF_LIFE_DAYS
from ..core.vocabulary import SOURCE_TIERS
from ..warehouse import Warehouse

#: How much more a report weighs when its wording is high-severity, or when it states an
#: expectation gap (see the module docstring for the measurement behind 1.5).
SEVERITY_LANGUAGE_FACTOR = 1.5
EXPECTATION_GAP_FACTOR = 1.5

_TIER = "CASE " + " ".join(
    f"WHEN r.source IN ({', '.join(repr(s) for s in sources)}) THEN '{tier}'" for tier, sources in SOURCE_TIERS.items()
) + " END"

_BY_TIER = ",\n        ".join(
    f"count(DISTINCT account) FILTER (WHERE tier = '{tier}') AS accounts_{tier}" for tier in SOURCE_TIERS
) + ",\n        " + ",\n        ".join(
    f"count(*) FILTER (WHERE tier = '{tier}') AS reports_{tier}" for tier in SOURCE_TIERS
)

_DEMAND = f"""
WITH considered AS (
    SELECT m.cluster_id, r.account, r.session_id, r.tool, r.method, r.received_at, r.lane,
           r.category, r.severity, r.outcome, r.status, {_TIER} AS tier,
           s.sentiment, s.specificity, s.expectation_gap, s.severity_language,
           CASE WHEN r.severity = 'blocking' OR r.outcome = 'blocked' THEN 3.0
                WHEN r.severity = 'high' THEN 2.0
                WHEN r.severity = 'low' THEN 0.5
                ELSE 1.0 END AS severity_weight,
           CASE WHEN s.severity_language = 'high' THEN $language_factor ELSE 1.0 END
         * CASE WHEN s.expectation_gap THEN $gap_factor ELSE 1.0 END AS signal_factor
    FROM cluster_members m
    JOIN records r USING (collector, id)
    LEFT JOIN record_signals s USING (collector, id)
    WHERE m.view = $view AND m.cluster_id IS NOT NULL AND r.received_at <= $as_of
      AND ($sources::VARCHAR[] IS NULL OR list_contains($sources::VARCHAR[], r.source))
), members AS (
    SELECT * FROM considered WHERE status IS DISTINCT FROM 'dismissed'
), dismissed AS (
    SELECT cluster_id, count(*) AS dismissed_reports FROM considered WHERE status = 'dismissed' GROUP BY ALL
), per_account AS (
    SELECT cluster_id, account, max(severity_weight * signal_factor) AS weight, max(received_at) AS latest
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
        {_BY_TIER},
        count(DISTINCT session_id) AS sessions,
        coalesce(list(DISTINCT tool ORDER BY tool) FILTER (WHERE tool IS NOT NULL), []) AS tools,
        min(received_at) AS first_seen,
        max(received_at) AS last_seen,
        histogram(lane) AS lanes,
        histogram(category) AS categories,
        histogram(coalesce(severity, 'unknown')) AS severities,
        histogram(coalesce(outcome, 'unknown')) AS outcomes,
        count(*) FILTER (WHERE severity_weight = 3.0) AS blocking_reports,
        count(*) FILTER (WHERE expectation_gap) AS expectation_gaps,
        count(*) FILTER (WHERE severity_language = 'high') AS high_severity_language,
        avg(sentiment) AS mean_sentiment,
        avg(specificity) AS mean_specificity,
        count(*) FILTER (WHERE received_at > $as_of - INTERVAL 14 DAY) AS reports_last_14_days,
        count(*) FILTER (WHERE received_at > $as_of - INTERVAL 56 DAY
                           AND received_at <= $as_of - INTERVAL 14 DAY) AS reports_6_weeks_before
    FROM members GROUP BY cluster_id
)
SELECT c.id AS cluster_id, c.service, c.polarity, c.status, c.label, f.* EXCLUDE (cluster_id),
    coalesce(d.dismissed_reports, 0) AS dismissed_reports,
    CASE WHEN f.first_seen > $as_of - INTERVAL 7 DAY THEN 'new'
         WHEN f.reports_last_14_days >= 3
          AND f.reports_last_14_days >= 2 * f.reports_6_weeks_before / 3.0 THEN 'rising'
         ELSE 'steady' END AS trend,
    c.status = 'fixed' AND f.last_seen > c.fixed_at AS regression,
    round(coalesce(s.score, 0), 3) AS score
FROM figures f
JOIN clusters c ON c.id = f.cluster_id
LEFT JOIN score s USING (cluster_id)
LEFT JOIN dismissed d USING (cluster_id)
WHERE c.status <> 'merged'
ORDER BY score DESC, accounts DESC, reports DESC, cluster_id
"""


def latest_report(warehouse: Warehouse) -> datetime | None:
    return warehouse.con.execute("SELECT max(received_at) FROM records").fetchall()[0][0]


def demand(
    warehouse: Warehouse,
    as_of: datetime | None = None,
    view: str = "reports",
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    sources: Sequence[str] | None = None,
) -> pl.DataFrame:
    """One row per live cluster of ``view`` with a live report, highest ranking score first;
    with ``sources``, counting only reports of those ``source`` values."""
    as_of = as_of or latest_report(warehouse)
    if as_of is None:
        return pl.DataFrame()
    params = {
        "view": view, "as_of": as_of, "half_life": half_life_days, "sources": list(sources) if sources else None,
        "language_factor": SEVERITY_LANGUAGE_FACTOR, "gap_factor": EXPECTATION_GAP_FACTOR,
    }
    return warehouse.con.sql(_DEMAND, params=params).pl()
