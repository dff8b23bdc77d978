"""Demand per cluster, in DuckDB SQL: how many distinct accounts hit it, and how it moves.

Like Sentry's "users affected", demand is counted by distinct (pseudonymised) accounts: one
agent retrying twenty times is one account. Figures are computed "as of" an instant: every
report received *before* it counts. By default that is just after the newest report in the
warehouse (:func:`default_as_of`), so the same data always gives the same figures.

**This week** has one definition, here, for every reader (``clusters list``, ``clusters show``,
drafted issues and the weekly digest): the ISO week (Monday 00:00 UTC) that holds the as-of
instant, up to that instant; **last week** is the whole ISO week before it (:func:`weeks`). The
digest of a week is as of that week's end, so its "this week" is that week; ``clusters list
--as-of 2026-11-30`` gives the figures of the 2026-W48 digest. Each row says which week it
counted (``week``, ``week_start``) and as of when (``as_of``).

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

**Trend** is one rule, over the two figures every reader prints beside it: distinct accounts
this week (``accounts_this_week``) against last week (``accounts_last_week``), so a reader can
check the word against the numbers next to it:

- ``new``: the cluster's first report is this week (so last week shows 0);
- ``rising``: more accounts this week than last week;
- ``falling``: fewer accounts this week than last week — when the week is still in progress
  (the as-of instant is before its end: mid-week, and on the default instant unless the newest
  report closed the week), fewer than last week's accounts scaled to the share of the week gone
  by (:attr:`Weeks.elapsed`), rounded to whole accounts (``round(last week × elapsed)``, a half
  rounded up), so a Monday morning is not "falling" for lack of time; a week that is over is
  falling with any account fewer;
- ``steady``: otherwise — as many as last week, or, in a week in progress, fewer but not short
  of last week's pace.

A week in progress can only gain accounts, so it is ``rising`` as soon as it has more than last
week: it stays so to its end. The digest counts a past week as of its end, where the rule is
the plain comparison. A cluster whose issue was fixed and which has reports after the fix is a
``regression`` (a flag beside the trend, which readers show instead of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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
    WHERE m.view = $view AND m.cluster_id IS NOT NULL AND r.received_at < $as_of
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
        count(DISTINCT account) FILTER (WHERE received_at >= $this_week) AS accounts_this_week,
        count(DISTINCT account) FILTER (WHERE received_at >= $last_week AND received_at < $this_week)
            AS accounts_last_week,
        count(*) FILTER (WHERE received_at >= $this_week) AS reports_this_week,
        count(*) FILTER (WHERE received_at >= $last_week AND received_at < $this_week) AS reports_last_week,
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
        avg(specificity) AS mean_specificity
    FROM members GROUP BY cluster_id
)
SELECT c.id AS cluster_id, c.view, c.service, c.polarity, c.status, c.label, f.* EXCLUDE (cluster_id),
    coalesce(d.dismissed_reports, 0) AS dismissed_reports,
    CASE WHEN f.first_seen >= $this_week THEN 'new'
         WHEN f.accounts_this_week > f.accounts_last_week THEN 'rising'
         WHEN f.accounts_this_week < round(f.accounts_last_week * $elapsed) THEN 'falling'
         ELSE 'steady' END AS trend,
    c.status = 'fixed' AND f.last_seen > c.fixed_at AS regression,
    round(coalesce(s.score, 0), 3) AS score,
    c.confidence, coalesce(c.needs_review, false) AS needs_review, c.config_version,
    c.fixed_at, c.created_at, c.updated_at,
    $as_of::TIMESTAMPTZ AS as_of, $week::VARCHAR AS week, $this_week::TIMESTAMPTZ AS week_start
FROM figures f
JOIN clusters c ON c.id = f.cluster_id
LEFT JOIN score s USING (cluster_id)
LEFT JOIN dismissed d USING (cluster_id)
WHERE c.status <> 'merged'
ORDER BY score DESC, accounts DESC, reports DESC, cluster_id
"""


#: How far past the newest report the default as-of instant lies: DuckDB keeps microseconds,
#: so "before newest + 1 µs" is "up to and including the newest".
_JUST_AFTER = timedelta(microseconds=1)
_WEEK = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class Weeks:
    """The weeks demand is counted in, as of an instant (see the module docstring)."""

    as_of: datetime
    #: Monday 00:00 UTC of the ISO week that holds the last instant before ``as_of``.
    this_week: datetime
    #: The Monday before: last week is ``[last_week, this_week)``.
    last_week: datetime

    @property
    def elapsed(self) -> float:
        """The share of this week gone by as of ``as_of``: in (0, 1], 1 once the week is over."""
        return min(1.0, (self.as_of - self.this_week) / _WEEK)

    @property
    def name(self) -> str:
        """The ISO week counted as "this week": ``2026-W48``."""
        year, number, _ = self.this_week.isocalendar()
        return f"{year}-W{number:02d}"


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one (``--as-of 2026-11-30``) is read as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def weeks(as_of: datetime) -> Weeks:
    """This week and last week as of ``as_of``: the one definition every reader uses."""
    as_of = utc(as_of)
    last_instant = as_of - _JUST_AFTER
    monday = datetime.combine(last_instant.date() - timedelta(days=last_instant.weekday()), datetime.min.time(), UTC)
    return Weeks(as_of=as_of, this_week=monday, last_week=monday - _WEEK)


def latest_report(warehouse: Warehouse) -> datetime | None:
    return warehouse.con.execute("SELECT max(received_at) FROM records").fetchall()[0][0]


def default_as_of(warehouse: Warehouse) -> datetime | None:
    """Just after the newest report (None for an empty warehouse): the default as-of instant of
    every reader, so the same data always gives the same figures."""
    latest = latest_report(warehouse)
    return None if latest is None else utc(latest) + _JUST_AFTER


def demand(
    warehouse: Warehouse,
    as_of: datetime | None = None,
    view: str = "reports",
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    sources: Sequence[str] | None = None,
) -> pl.DataFrame:
    """One row per live cluster of ``view`` (every status but merged: readers that rank leave
    ignored ones out) with a live report received before ``as_of`` (default:
    :func:`default_as_of`), highest ranking score first; with ``sources``, counting only reports
    of those ``source`` values."""
    as_of = as_of or default_as_of(warehouse)
    if as_of is None:
        return pl.DataFrame()
    counted = weeks(as_of)
    params = {
        "view": view, "as_of": counted.as_of, "this_week": counted.this_week, "last_week": counted.last_week,
        "week": counted.name, "elapsed": counted.elapsed, "half_life": half_life_days, "sources": list(sources) if sources else None,
        "language_factor": SEVERITY_LANGUAGE_FACTOR, "gap_factor": EXPECTATION_GAP_FACTOR,
    }
    return warehouse.con.sql(_DEMAND, params=params).pl()
