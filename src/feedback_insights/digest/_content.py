"""The weekly digest's content: one ISO week of the warehouse, in DuckDB SQL.

Product managers read it to see what agents hit, what is new or rising, what got fixed and
what agents rely on. Demand figures are computed as of the end of the week, so a past week's
figures stay the same whenever it is rendered (issue links and statuses are today's). Only scrubbed text is quoted (the warehouse
holds nothing else) and accounts appear as counts, never as ids.

Reports dismissed in triage are no demand: they are left out of every figure (the redaction
count still includes them: it says what was stored). The week is split by who reported (agents,
runtimes, people: :data:`~feedback_insights.core.vocabulary.SOURCE_TIERS`), and a digest can be
made of one tier's reports alone (``source``), every figure then counting only those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl

from ..clusters import demand
from ..config import DEFAULT_HALF_LIFE_DAYS
from ..core import now_utc
from ..core.vocabulary import SOURCE_TIERS, TIER_REPORTERS, sources_of
from ..warehouse import Warehouse

SPARK_WEEKS = 8
TOP = 10

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")

#: The reports a digest counts: not dismissed in triage, and of the digest's sources (all when
#: ``$sources`` is NULL). ``{r}`` is the records table's alias.
_LIVE = """{r}status IS DISTINCT FROM 'dismissed'
  AND ($sources::VARCHAR[] IS NULL OR list_contains($sources::VARCHAR[], {r}source))"""
_OF_SOURCES = "($sources::VARCHAR[] IS NULL OR list_contains($sources::VARCHAR[], {r}source))"
#: Clusters holding a report of the digest's sources (every cluster when ``$sources`` is NULL).
_CLUSTER_OF_SOURCES = """($sources::VARCHAR[] IS NULL OR EXISTS (
    SELECT 1 FROM cluster_members m JOIN records r USING (collector, id)
    WHERE m.cluster_id = {cluster} AND list_contains($sources::VARCHAR[], r.source)))"""
_TIER = "CASE " + " ".join(
    f"WHEN source IN ({', '.join(repr(s) for s in sources)}) THEN '{tier}'" for tier, sources in SOURCE_TIERS.items()
) + " END"

_HEADLINE = f"""
SELECT count(*) AS reports,
       count(DISTINCT account) AS accounts,
       count(DISTINCT service) AS services,
       coalesce(avg(CASE WHEN severity = 'blocking' OR outcome = 'blocked' THEN 1.0 ELSE 0.0 END), 0) AS blocked_share
FROM records WHERE received_at >= $start AND received_at < $end AND {_LIVE.format(r="")}
"""

_TIERS = f"""
SELECT tier,
       count(*) FILTER (WHERE received_at >= $start) AS reports,
       count(DISTINCT account) FILTER (WHERE received_at >= $start) AS accounts,
       count(*) FILTER (WHERE received_at < $start) AS last_week_reports,
       coalesce(avg(blocked) FILTER (WHERE received_at >= $start), 0) AS blocked_share,
       count(*) FILTER (WHERE received_at >= $start AND lane = 'positive_feedback') AS praise
FROM (SELECT {_TIER} AS tier, received_at, account, lane,
             CASE WHEN severity = 'blocking' OR outcome = 'blocked' THEN 1.0 ELSE 0.0 END AS blocked
      FROM records WHERE received_at >= $start - INTERVAL 7 DAY AND received_at < $end AND {_LIVE.format(r="")})
WHERE tier IS NOT NULL
GROUP BY tier ORDER BY list_position({list(SOURCE_TIERS)!r}, tier)
"""

_WEEKLY_ACCOUNTS = f"""
SELECT m.cluster_id, date_diff('week', date_trunc('week', r.received_at), $start::TIMESTAMPTZ) AS ago,
       count(DISTINCT r.account) AS accounts
FROM cluster_members m JOIN records r ON r.collector = m.collector AND r.id = m.id
WHERE m.view = $view AND m.cluster_id IS NOT NULL
  AND r.received_at >= $start - INTERVAL 7 WEEK AND r.received_at < $end AND {_LIVE.format(r="r.")}
GROUP BY ALL
"""

_SERVICES = f"""
SELECT coalesce(service, '(none)') AS service, count(*) AS reports, count(DISTINCT account) AS accounts,
       avg(CASE WHEN severity = 'blocking' OR outcome = 'blocked' THEN 1.0 ELSE 0.0 END) AS blocked_share,
       count(*) FILTER (WHERE lane = 'positive_feedback') AS praise
FROM records WHERE received_at >= $start AND received_at < $end AND {_LIVE.format(r="")}
GROUP BY ALL ORDER BY accounts DESC, reports DESC, service
"""

_MIX = f"""
SELECT {{column}} AS name, count(*) AS reports
FROM records WHERE received_at >= $start AND received_at < $end AND {_LIVE.format(r="")}
GROUP BY ALL ORDER BY reports DESC, name
"""

#: Each cluster's representative words: its medoid's, unless the medoid was dismissed or is of
#: another source than the digest's; then the newest such report of the week (or before it).
#: With the quoted record's source, dialect and rating, by which the rendering attributes it.
_QUOTES = f"""
SELECT cluster_id, quote, quote_source, quote_dialect, quote_rating FROM (
    SELECT c.id AS cluster_id, {{quote}} AS quote,
           r.source AS quote_source, r.dialect AS quote_dialect, r.rating AS quote_rating,
           row_number() OVER (PARTITION BY c.id ORDER BY (r.collector = c.medoid_collector AND r.id = c.medoid_id) DESC,
                                                         r.received_at < $end DESC, r.received_at DESC, r.id) AS rank
    FROM clusters c JOIN cluster_members m ON m.cluster_id = c.id
    JOIN records r ON r.collector = m.collector AND r.id = m.id
    WHERE c.view = $view AND {_LIVE.format(r="r.")}
) WHERE rank = 1
"""

_FIXED = f"""
SELECT d.cluster_id, d.title, d.issue_url, c.service
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE d.known_status = 'fixed' AND c.fixed_at >= $start AND c.fixed_at < $end
  AND {_CLUSTER_OF_SOURCES.format(cluster="d.cluster_id")}
ORDER BY c.fixed_at
"""

_DRAFTS = f"""
SELECT d.id, d.cluster_id, d.status, d.known_status, d.title, d.issue_url, d.accounts, c.service,
       (d.status IN ('pending', 'approved') AND c.status <> 'ignored')
           OR (d.status = 'filed' AND d.known_status NOT IN ('fixed', 'wont_fix')) AS open
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE {_CLUSTER_OF_SOURCES.format(cluster="d.cluster_id")}
ORDER BY d.status = 'filed', d.accounts DESC, d.id
"""

_SCRUBBED = f"""
SELECT j.key AS kind, CAST(sum(CAST(j.value AS INTEGER)) AS BIGINT) AS count
FROM records, json_each(records.redactions) AS j
WHERE received_at >= $start AND received_at < $end AND {_OF_SOURCES.format(r="records.")}
GROUP BY ALL ORDER BY count DESC, kind
"""


class DigestError(ValueError):
    """A digest that cannot be made or sent as asked (a week that does not parse or exist, a
    webhook that refuses it)."""


@dataclass(frozen=True, slots=True)
class Week:
    """An ISO week, Monday 00:00 UTC to the next Monday."""

    year: int
    number: int

    @classmethod
    def parse(cls, text: str) -> Week:
        found = _WEEK.match(text)
        if not found:
            raise ValueError(f"--week: expected an ISO week like 2026-W48 (got {text!r})")
        week = cls(int(found.group(1)), int(found.group(2)))
        try:
            week.start  # noqa: B018 (validates the number)
        except ValueError:
            raise ValueError(f"--week: {text} does not exist") from None
        return week

    @classmethod
    def before(cls, moment: datetime) -> Week:
        """The last complete week before ``moment``: what a Monday-morning digest covers."""
        year, number, _ = (moment.astimezone(UTC) - timedelta(days=7)).isocalendar()
        return cls(year, number)

    @property
    def start(self) -> datetime:
        return datetime.combine(date.fromisocalendar(self.year, self.number, 1), datetime.min.time(), UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=7)

    def __str__(self) -> str:
        return f"{self.year}-W{self.number:02d}"


@dataclass(slots=True)
class Digest:
    week: Week
    generated_at: datetime
    headline: dict[str, Any]
    last_week: dict[str, Any]
    top_problems: list[dict[str, Any]] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    rising: list[dict[str, Any]] = field(default_factory=list)
    regressions: list[dict[str, Any]] = field(default_factory=list)
    fixed: list[dict[str, Any]] = field(default_factory=list)
    praise: list[dict[str, Any]] = field(default_factory=list)
    goals: list[dict[str, Any]] = field(default_factory=list)
    services: list[dict[str, Any]] = field(default_factory=list)
    lanes: list[dict[str, Any]] = field(default_factory=list)
    categories: list[dict[str, Any]] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)
    scrubbed: list[dict[str, Any]] = field(default_factory=list)
    #: The week by who reported: one row per tier (agent, runtime, human) with reports.
    tiers: list[dict[str, Any]] = field(default_factory=list)
    #: The ``--source`` this digest counts alone (a tier or one source value); None: everyone.
    source: str | None = None

    @property
    def scrubbed_total(self) -> int:
        return sum(row["count"] for row in self.scrubbed)

    @property
    def reporters(self) -> str:
        """Who a one-source digest is about, in words: "agents", "people", "server_observed"."""
        return TIER_REPORTERS.get(self.source or "", self.source or "everyone")


def _rows(warehouse: Warehouse, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return warehouse.con.sql(sql, params=params).pl().to_dicts()


def _clusters(warehouse: Warehouse, week: Week, view: str, half_life_days: float,
              sources: tuple[str, ...] | None) -> pl.DataFrame:
    """Live clusters of ``view`` with demand as of the week's end (so "this week" is the week:
    :func:`~feedback_insights.clusters.demand`), an 8-week sparkline of distinct accounts and
    their representative report's words. Ignored clusters are left out: a maintainer said they
    are not a problem to rank (they still count in the week's totals, which say what arrived)."""
    figures = demand(warehouse, as_of=week.end, view=view, half_life_days=half_life_days, sources=sources)
    if figures.is_empty():
        return figures
    figures = figures.filter(pl.col("status") != "ignored")
    if figures.is_empty():
        return figures
    chosen = list(sources) if sources else None
    weekly = warehouse.con.sql(
        _WEEKLY_ACCOUNTS, params={"view": view, "start": week.start, "end": week.end, "sources": chosen}).pl()
    counts = {(c, ago): n for c, ago, n in weekly.iter_rows()}
    ids = figures["cluster_id"].to_list()
    spark = pl.Series("spark", [[counts.get((c, ago), 0) for ago in range(SPARK_WEEKS - 1, -1, -1)] for c in ids])
    quote = "coalesce(r.detail, r.summary)" if view == "reports" else "r.goal"
    quotes = warehouse.con.sql(_QUOTES.format(quote=quote), params={"view": view, "end": week.end, "sources": chosen}).pl()
    return figures.with_columns(spark).join(quotes, on="cluster_id", how="left")


def _tiers(warehouse: Warehouse, window: dict[str, Any]) -> list[dict[str, Any]]:
    """The week by who reported, each tier named for the reader ("agents", "people")."""
    return [row | {"who": TIER_REPORTERS[row["tier"]]} for row in _rows(warehouse, _TIERS, window)]


def build(warehouse: Warehouse, week: Week, half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
          source: str | None = None) -> Digest:
    """One week's digest; with ``source`` (a tier, or one ``source`` value: see
    :func:`~feedback_insights.core.vocabulary.sources_of`), of those reports alone."""
    sources = sources_of(source) if source else None
    chosen = list(sources) if sources else None
    window = {"start": week.start, "end": week.end, "sources": chosen}
    drafts = _rows(warehouse, _DRAFTS, {"sources": chosen})
    before = {"start": week.start - timedelta(days=7), "end": week.start, "sources": chosen}
    digest = Digest(
        week=week,
        generated_at=now_utc(),
        headline=_rows(warehouse, _HEADLINE, window)[0],
        last_week=_rows(warehouse, _HEADLINE, before)[0],
        services=_rows(warehouse, _SERVICES, window),
        lanes=_rows(warehouse, _MIX.format(column="lane"), window),
        categories=_rows(warehouse, _MIX.format(column="category"), window),
        fixed=_rows(warehouse, _FIXED, window),
        issues=[d for d in drafts if d["open"]],
        scrubbed=_rows(warehouse, _SCRUBBED, window),
        tiers=_tiers(warehouse, window),
        source=source,
    )
    reports = _clusters(warehouse, week, "reports", half_life_days, sources)
    if not reports.is_empty():
        active = reports.filter(pl.col("accounts_this_week") > 0)
        problems = active.filter(pl.col("polarity") == "problem")
        digest.top_problems = problems.sort(["accounts_this_week", "score"], descending=True).head(TOP).to_dicts()
        digest.new = problems.filter(pl.col("trend") == "new").head(TOP).to_dicts()
        digest.rising = problems.filter(pl.col("trend") == "rising").head(TOP).to_dicts()
        digest.regressions = problems.filter(pl.col("regression")).to_dicts()
        digest.praise = active.filter(pl.col("polarity") == "praise").sort("accounts", descending=True).head(5).to_dicts()
    goals = _clusters(warehouse, week, "goals", half_life_days, sources)
    if not goals.is_empty():
        digest.goals = goals.filter(pl.col("polarity") == "problem").sort("accounts", descending=True).head(8).to_dicts()
    issue_of = {row["cluster_id"]: row for row in drafts}
    for row in digest.top_problems + digest.new + digest.rising + digest.regressions:
        row["issue"] = issue_of.get(row["cluster_id"])
    return digest
