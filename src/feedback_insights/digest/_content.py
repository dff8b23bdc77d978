"""The weekly digest's content: one ISO week of the warehouse, in DuckDB SQL.

Product managers read it to see what agents hit, what is new or rising, what they ask for,
what got fixed and what agents rely on, and to act on it: each problem is one card, in the
first section it qualifies for, with its distinct accounts this week and last week, its reports
and blocking reports of the same two weeks (by the one definition of those weeks,
:func:`~feedback_insights.clusters.weeks`), its trend by the one rule over those two figures
(``clusters._demand``'s docstring), and where its issue stands (:func:`status`). Requests
(clusters of polarity ``request``) are cards of their own section, apart from the problems and
from praise; the week's reports in no cluster are counted per service with a few examples
(:func:`~feedback_insights.clusters.unclustered_services`), so that none vanishes.
Demand figures are computed as of the end of the week, so a past week's figures stay the same
whenever it is rendered (issue links and statuses are today's). Only scrubbed text is quoted
(the warehouse holds nothing else) and accounts appear as counts, never as ids.

Reports dismissed in triage are no demand: they are left out of every figure (the redaction
count still includes them: it says what was stored). The week is split by who reported (agents,
runtimes, people: :data:`~feedback_insights.core.vocabulary.SOURCE_TIERS`), and a digest can be
made of one tier's reports alone (``source``), every figure then counting only those.

Reports of owner-private sources (:func:`~feedback_insights.ingest.sources.private_collectors`)
count in every figure but are never quoted: a card quotes another report of its cluster or
none, says how many of its reports are owner-private, and a cluster holding one is called by
its neutral name (:attr:`~feedback_insights.drafts.DraftInput.neutral_name`: tool, category and
the terms many of its reports use), not by its label or its issue's title, which may be older
than the declaration; an unclustered private report is an example without its words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl

from ..clusters import demand, unclustered_services
from ..config import DEFAULT_HALF_LIFE_DAYS
from ..core import now_utc
from ..core.vocabulary import SOURCE_TIERS, TIER_REPORTERS, sources_of
from ..drafts import draft_input
from ..ingest.sources import private_collectors
from ..warehouse import Warehouse

SPARK_WEEKS = 8
TOP = 10
#: The clusters' polarities the digest lists, each in its own sections: problems (the top,
#: new, rising and regressions), requests, praise.
PROBLEM, REQUEST, PRAISE = "problem", "request", "praise"

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")

#: The reports of the digest's sources (all when ``$sources`` is NULL); ``{r}`` is the records
#: table's alias. Those it counts (:data:`_LIVE`) are those not dismissed in triage too.
_OF_SOURCES = "($sources::VARCHAR[] IS NULL OR list_contains($sources::VARCHAR[], {r}source))"
_LIVE = "{r}status IS DISTINCT FROM 'dismissed' AND " + _OF_SOURCES
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

#: Per cluster and week (``ago``: 0 for the digest's week, 1 for the one before …, counted back
#: from the end of the digest's week), distinct accounts, reports, blocking reports and the
#: accounts of each tier: the figures of a card, all of one window, and of its sparkline.
_WEEKLY = f"""
SELECT m.cluster_id, (epoch_us($end::TIMESTAMPTZ) - epoch_us(r.received_at) - 1) // {7 * 86_400_000_000} AS ago,
       count(DISTINCT r.account) AS accounts, count(*) AS reports,
       count(*) FILTER (WHERE r.severity = 'blocking' OR r.outcome = 'blocked') AS blocking,
       {", ".join(f"count(DISTINCT r.account) FILTER (WHERE r.source IN ({', '.join(repr(s) for s in sources)})) AS {tier}"
                  for tier, sources in SOURCE_TIERS.items())}
FROM cluster_members m JOIN records r ON r.collector = m.collector AND r.id = m.id
WHERE m.view = $view AND m.cluster_id IS NOT NULL
  AND r.received_at >= $end - INTERVAL {SPARK_WEEKS} WEEK AND r.received_at < $end AND {_LIVE.format(r="r.")}
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
SELECT cluster_id, key_terms, quote, quote_source, quote_dialect, quote_rating FROM (
    SELECT c.id AS cluster_id, c.key_terms, {{quote}} AS quote,
           r.source AS quote_source, r.dialect AS quote_dialect, r.rating AS quote_rating,
           row_number() OVER (PARTITION BY c.id ORDER BY (r.collector = c.medoid_collector AND r.id = c.medoid_id) DESC,
                                                         r.received_at < $end DESC, r.received_at DESC, r.id) AS rank
    FROM clusters c JOIN cluster_members m ON m.cluster_id = c.id
    JOIN records r ON r.collector = m.collector AND r.id = m.id
    WHERE c.view = $view AND {_LIVE.format(r="r.")} AND NOT list_contains($private::VARCHAR[], r.collector)
) WHERE rank = 1
"""

#: Per cluster, how many of its live reports are owner-private.
_PRIVATE = f"""
SELECT m.cluster_id, count(*) AS private_reports
FROM cluster_members m JOIN records r ON r.collector = m.collector AND r.id = m.id
WHERE m.view = $view AND m.cluster_id IS NOT NULL AND {_LIVE.format(r="r.")}
  AND list_contains($private::VARCHAR[], r.collector)
GROUP BY ALL
"""

_FIXED = f"""
SELECT d.id, d.cluster_id, d.status, d.known_status, d.title, d.issue_number, d.issue_url, c.service
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE d.known_status = 'fixed' AND c.fixed_at >= $start AND c.fixed_at < $end
  AND {_CLUSTER_OF_SOURCES.format(cluster="d.cluster_id")}
ORDER BY c.fixed_at
"""

_DRAFTS = f"""
SELECT d.id, d.cluster_id, d.status, d.known_status, d.title, d.issue_number, d.issue_url, d.accounts, c.service,
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


#: An issue link the digest may print: an http(s) URL of plain characters (a filed-by-hand
#: issue's URL came from a collector; nothing in it may close a Markdown link or a Slack one).
_SAFE_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~/%+-]*)?")
_ISSUE_NUMBER = re.compile(r"/issues/(\d+)$")
#: What a filed issue's known status is called on a card.
_FILED = {"planned": "planned", "in_progress": "in progress", "fixed": "fixed", "wont_fix": "won't fix"}
#: How long a theme named by its representative words may be.
NAME_CHARS = 90


class DigestError(ValueError):
    """A digest that cannot be made or sent as asked (a week that does not parse, has not begun
    or does not exist; a webhook or a mail server that refuses it)."""


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
        return cls.of(moment - timedelta(days=7))

    @classmethod
    def of(cls, moment: datetime) -> Week:
        """The week holding ``moment``."""
        year, number, _ = moment.astimezone(UTC).isocalendar()
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
    """One week's digest. Each problem is in one list only, the first it qualifies for, in
    the order the digest shows them: :attr:`regressions` (a fixed problem came back),
    :attr:`top_problems`, :attr:`new`, :attr:`rising`, then the :attr:`requests` (suggestions,
    listed apart from the problems); ``fixed`` and ``issues`` hold every
    fixed cluster and open draft or issue, and :attr:`fixed_unlisted` / :attr:`issues_unlisted`
    those no card above shows already."""

    week: Week
    generated_at: datetime
    headline: dict[str, Any]
    last_week: dict[str, Any]
    top_problems: list[dict[str, Any]] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    rising: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
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
    #: The week's reports in no cluster, per service: counts and a few ``examples`` each.
    unclustered: list[dict[str, Any]] = field(default_factory=list)
    #: The ``--source`` this digest counts alone (a tier or one source value); None: everyone.
    source: str | None = None
    #: The review desk's address (``[digest] desk_url``): cards link to its pages.
    desk_url: str | None = None

    @property
    def scrubbed_total(self) -> int:
        return sum(row["count"] for row in self.scrubbed)

    @property
    def unclustered_total(self) -> int:
        return sum(row["reports"] for row in self.unclustered)

    @property
    def reporters(self) -> str:
        """Who a one-source digest is about, in words: "agents", "people", "server_observed"."""
        return TIER_REPORTERS.get(self.source or "", self.source or "everyone")

    @property
    def empty(self) -> bool:
        """No report arrived in the week: the digest says so in one sentence."""
        return not self.headline["reports"]

    @property
    def in_progress(self) -> bool:
        """The week is not over: its figures are those so far."""
        return self.generated_at < self.week.end

    @property
    def cards(self) -> list[dict[str, Any]]:
        """Every problem and request shown as a card, in the digest's order."""
        return self.regressions + self.top_problems + self.new + self.rising + self.requests

    @property
    def fixed_unlisted(self) -> list[dict[str, Any]]:
        shown = {p["cluster_id"] for p in self.cards}
        return [f for f in self.fixed if f["cluster_id"] not in shown]

    @property
    def issues_unlisted(self) -> list[dict[str, Any]]:
        shown = {p["cluster_id"] for p in self.cards}
        return [i for i in self.issues if i["cluster_id"] not in shown]


def _rows(warehouse: Warehouse, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return warehouse.con.sql(sql, params=params).pl().to_dicts()


def _clusters(warehouse: Warehouse, week: Week, view: str, half_life_days: float,
              sources: tuple[str, ...] | None) -> pl.DataFrame:
    """Live clusters of ``view`` with demand as of the week's end (so "this week" is the week:
    :func:`~feedback_insights.clusters.weeks`), an 8-week sparkline of distinct accounts, the
    week's and the week before's reports and blocking reports, and their representative
    report's words. Ignored clusters are left out: a maintainer said they are not a problem to
    rank (they still count in the week's totals, which say what arrived)."""
    figures = demand(warehouse, as_of=week.end, view=view, half_life_days=half_life_days, sources=sources)
    if figures.is_empty():
        return figures
    figures = figures.filter(pl.col("status") != "ignored")
    if figures.is_empty():
        return figures
    chosen = list(sources) if sources else None
    weekly = {(row["cluster_id"], row["ago"]): row for row in _rows(
        warehouse, _WEEKLY, {"view": view, "end": week.end, "sources": chosen})}
    none: dict[str, int] = {"accounts": 0, "reports": 0, "blocking": 0} | dict.fromkeys(SOURCE_TIERS, 0)
    ids = figures["cluster_id"].to_list()

    def week_of(cluster: int, ago: int) -> dict[str, int]:
        return weekly.get((cluster, ago), none)

    extra = pl.DataFrame({
        "cluster_id": ids,
        "spark": [[week_of(c, ago)["accounts"] for ago in range(SPARK_WEEKS - 1, -1, -1)] for c in ids],
        "blocking_this_week": [week_of(c, 0)["blocking"] for c in ids],
        "blocking_last_week": [week_of(c, 1)["blocking"] for c in ids],
        "tiers_this_week": [{tier: week_of(c, 0)[tier] for tier in SOURCE_TIERS} for c in ids],
    }, schema_overrides={"cluster_id": figures.schema["cluster_id"]})
    quote = "coalesce(r.detail, r.summary)" if view == "reports" else "r.goal"
    private = sorted(private_collectors(warehouse.con))
    quotes = warehouse.con.sql(_QUOTES.format(quote=quote),
                               params={"view": view, "end": week.end, "sources": chosen, "private": private}).pl()
    withheld = warehouse.con.sql(_PRIVATE, params={"view": view, "sources": chosen, "private": private}).pl()
    rows = figures.join(extra, on="cluster_id").join(quotes, on="cluster_id", how="left")
    rows = rows.join(withheld.cast({"cluster_id": figures.schema["cluster_id"]}), on="cluster_id", how="left")
    return rows.with_columns(pl.col("private_reports").fill_null(0))


def _unclustered(warehouse: Warehouse, week: Week, sources: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The week's reports in no cluster per service, each example with the ``quote_*`` keys a
    quote is attributed by (as a card's representative report)."""
    rows = unclustered_services(warehouse, start=week.start, end=week.end, sources=sources).to_dicts()
    private = private_collectors(warehouse.con)
    for row in rows:
        row["examples"] = [{"quote": None if e["collector"] in private else e["summary"],
                            "private": e["collector"] in private, "quote_source": e["source"],
                            "quote_dialect": e["dialect"], "quote_rating": e["rating"], "lane": e["lane"], "why": e["why"]}
                           for e in row["examples"]]
    return rows


def _tiers(warehouse: Warehouse, window: dict[str, Any]) -> list[dict[str, Any]]:
    """The week by who reported, each tier named for the reader ("agents", "people")."""
    return [row | {"who": TIER_REPORTERS[row["tier"]]} for row in _rows(warehouse, _TIERS, window)]


def theme_name(row: dict[str, Any], kind: str = "problem") -> str:
    """What a card is called, in words: its issue's title, else the cluster's name; a cluster
    named only by its key terms ("agents · give · names", the labeller's fallback) is called by
    its representative report's words instead. A cluster with private reports: its
    ``neutral_name`` (set by :func:`build`)."""
    if row.get("neutral_name"):
        return str(row["neutral_name"])
    issue = row.get("issue") or {}
    if issue.get("title"):
        return str(issue["title"])
    label = row.get("label")
    terms = row.get("key_terms") or []
    if label and label != " · ".join(terms[:3]):
        return str(label)
    words = " ".join(str(row.get("quote") or "").split())
    if words:
        return words if len(words) <= NAME_CHARS else words[: NAME_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return label or f"{kind} {row['cluster_id']}"


def safe_url(url: str | None) -> str | None:
    """``url`` if the digest may link it (see :data:`_SAFE_URL`), else None."""
    return url if url and _SAFE_URL.fullmatch(url) else None


def status(draft: dict[str, Any] | None, cluster_id: int, desk_url: str | None) -> dict[str, Any]:
    """Where a problem stands, for a card: ``kind`` (none, pending, approved, rejected,
    superseded, filed, planned, in_progress, fixed, wont_fix), ``text`` ("filed as #12",
    "draft waiting for review") and ``url`` (the issue; or the draft's page on the desk), with
    ``desk`` the cluster's page on the desk when one is configured."""
    desk = f"{desk_url}/clusters/{cluster_id}" if desk_url else None
    if draft is None:
        return {"kind": "none", "text": "no draft yet", "url": desk, "desk": desk}
    page = f"{desk_url}/drafts/{draft['id']}" if desk_url else None
    if draft["status"] != "filed":
        text = {"pending": "draft waiting for review", "approved": "approved, not filed yet",
                "rejected": "draft rejected"}.get(draft["status"], f"draft {draft['status']}")
        return {"kind": draft["status"], "text": text, "url": page, "desk": desk}
    url = safe_url(draft.get("issue_url"))
    number = draft.get("issue_number")
    if number is None and url and (found := _ISSUE_NUMBER.search(url)):
        number = int(found.group(1))
    issue = f"#{number}" if number is not None else "an issue"
    known = draft.get("known_status")
    text = f"{_FILED[known]} ({issue})" if known in _FILED else f"filed as {issue}"
    return {"kind": known if known in _FILED else "filed", "text": text, "url": url or page, "desk": desk}


def _sections(problems: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The problem cards, each in the first section it qualifies for: a regression (a fixed
    problem reported again), one of the top problems by accounts this week, new, rising."""
    shown: set[int] = set()

    def take(rows: pl.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
        chosen = [row for row in rows.to_dicts() if row["cluster_id"] not in shown][:limit]
        shown.update(row["cluster_id"] for row in chosen)
        return chosen

    ranked = problems.sort(["accounts_this_week", "score"], descending=True)
    return {
        "regressions": take(ranked.filter(pl.col("regression"))),
        "top_problems": take(ranked, TOP),
        "new": take(ranked.filter(pl.col("trend") == "new"), TOP),
        "rising": take(ranked.filter(pl.col("trend") == "rising"), TOP),
    }


def build(warehouse: Warehouse, week: Week, half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
          source: str | None = None, desk_url: str | None = None) -> Digest:
    """One week's digest; with ``source`` (a tier, or one ``source`` value: see
    :func:`~feedback_insights.core.vocabulary.sources_of`), of those reports alone; with
    ``desk_url``, cards link to the review desk."""
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
        unclustered=_unclustered(warehouse, week, sources),
        source=source,
        desk_url=desk_url,
    )
    reports = _clusters(warehouse, week, "reports", half_life_days, sources)
    if not reports.is_empty():
        active = reports.filter(pl.col("accounts_this_week") > 0)
        for name, rows in _sections(active.filter(pl.col("polarity") == PROBLEM)).items():
            setattr(digest, name, rows)
        digest.requests = active.filter(pl.col("polarity") == REQUEST).sort(
            ["accounts_this_week", "score"], descending=True).head(TOP).to_dicts()
        digest.praise = active.filter(pl.col("polarity") == PRAISE).sort("accounts", descending=True).head(5).to_dicts()
    goals = _clusters(warehouse, week, "goals", half_life_days, sources)
    if not goals.is_empty():
        digest.goals = goals.filter(pl.col("polarity") == PROBLEM).sort("accounts", descending=True).head(8).to_dicts()
    issue_of = {row["cluster_id"]: row for row in drafts}
    for row in digest.cards + digest.praise + digest.goals:
        if row.get("private_reports"):
            row["neutral_name"] = draft_input(warehouse, row).neutral_name
    private = {"view": "reports", "sources": chosen, "private": sorted(private_collectors(warehouse.con))}
    withheld = {row["cluster_id"] for row in _rows(warehouse, _PRIVATE, private)}
    for row in digest.fixed + digest.issues:
        if row["cluster_id"] in withheld:  # a title drafted before its source was declared private
            row["title"] = draft_input(warehouse, {**row, "label": None}).neutral_name
    for row in digest.cards:
        row["issue"] = issue_of.get(row["cluster_id"])
        row["status"] = status(row["issue"], row["cluster_id"], desk_url)
    for row in digest.cards + digest.praise:
        row["name"] = theme_name(row)
    for row in digest.goals:
        row["name"] = theme_name(row, "theme")
    for row in digest.fixed + digest.issues:
        row["state"] = status(row, row["cluster_id"], desk_url)
    return digest


def reports_in(warehouse: Warehouse, week: Week, source: str | None = None) -> int:
    """How many live reports arrived in ``week`` (so far, for the current one)."""
    sources = sources_of(source) if source else None
    window = {"start": week.start, "end": week.end, "sources": list(sources) if sources else None}
    return int(_rows(warehouse, _HEADLINE, window)[0]["reports"])
