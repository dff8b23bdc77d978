"""Demand per cluster: distinct accounts, weeks, trend, regression and the ranking score."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from feedback_insights.clusters import demand
from feedback_insights.clusters._demand import default_as_of, weeks
from feedback_insights.config import Config, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .conftest import write_jsonl

AS_OF = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _record(n: int, account: str | None, days_ago: float, outcome: str = "degraded") -> dict:
    record = {
        "id": f"fb_{n:04d}",
        "received_at": (AS_OF - timedelta(days=days_ago)).isoformat().replace("+00:00", "Z"),
        "service": "acme-companies-api",
        "source": "http",
        "feedback": {"type": "bug", "goal": "Export contacts", "message": f"export returned 500 (report {n})",
                     "outcome": outcome, "session_id": f"s{n % 3}"},
    }
    return record | ({"account": account} if account else {})


@pytest.fixture
def warehouse(tmp_path: Path):
    drop = tmp_path / "drop"
    drop.mkdir()
    steady = [_record(i, f"acct_{i % 4:024x}", days_ago=3 + 6 * i) for i in range(8)]  # 4 accounts over 6 weeks
    rising = [_record(100 + i, f"acct_{5 + i % 3:024x}", days_ago=1 + i, outcome="blocked") for i in range(6)]
    rising.append(_record(120, f"acct_{5:024x}", days_ago=40))
    new = [_record(200, f"acct_{9:024x}", days_ago=2), _record(201, None, days_ago=1), _record(202, None, days_ago=1)]
    late = [_record(50, f"acct_{1:024x}", days_ago=-1)]  # after the as-of instant: not counted
    write_jsonl(drop / "records.jsonl", [*steady, *rising, *new, *late])
    config = Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PrivacyConfig(hmac_key="k" * 32),
        sources=[FileDropConfig(kind="files", name="drop", path=drop)],
    )
    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).counts.quarantined == 0
        score_new_records(wh)
        now = datetime.now(UTC)
        for cluster_id, first in ((1, 0), (2, 100), (3, 200)):
            wh.con.execute(
                """INSERT INTO clusters (id, view, service, polarity, created_at, updated_at)
                   VALUES (?, 'reports', 'acme-companies-api', 'problem', ?, ?)""",
                [cluster_id, now, now],
            )
            wh.con.execute(
                """INSERT INTO cluster_members
                   SELECT 'reports', collector, id, NULL, ?, 'hdbscan', ? FROM records
                   WHERE CAST(substr(id, 4) AS INT) BETWEEN ? AND ?""",
                [cluster_id, now, first, first + 99],
            )
        yield wh


def test_distinct_accounts_weeks_and_anonymous_reports(warehouse: Warehouse) -> None:
    rows = {r["cluster_id"]: r for r in demand(warehouse, as_of=AS_OF).iter_rows(named=True)}
    steady, rising, new = rows[1], rows[2], rows[3]
    assert (steady["accounts"], steady["reports"], steady["anonymous_reports"]) == (4, 8, 0)
    assert (steady["accounts_this_week"], steady["accounts_last_week"]) == (1, 1)  # days 3 and 9
    assert (rising["accounts"], rising["reports"]) == (3, 7)
    assert (rising["accounts_this_week"], rising["accounts_last_week"]) == (3, 0)
    assert (new["accounts"], new["reports"], new["anonymous_reports"]) == (1, 3, 2)
    assert rising["blocking_reports"] == 6 and rising["outcomes"] == {"blocked": 6, "degraded": 1}
    assert steady["sessions"] == 3 and steady["tools"] == []
    assert steady["first_seen"] == AS_OF - timedelta(days=45)
    assert -1.0 <= steady["mean_sentiment"] <= 1.0


def test_trend_and_ranking_score(warehouse: Warehouse) -> None:
    frame = demand(warehouse, as_of=AS_OF)
    rows = {r["cluster_id"]: r for r in frame.iter_rows(named=True)}
    assert (rows[1]["trend"], rows[2]["trend"], rows[3]["trend"]) == ("steady", "rising", "new")
    # Three accounts whose worst report is blocking (weight 3), seen 1–3 days ago (half-life 14 days).
    expected = sum(3 * 0.5 ** (days / 14) for days in (1, 2, 3))
    assert rows[2]["score"] == pytest.approx(expected, abs=1e-3)
    # One account, seen 2 days ago; the anonymous reports add nothing.
    assert rows[3]["score"] == pytest.approx(0.5 ** (2 / 14), abs=1e-3)
    assert frame.get_column("cluster_id").to_list()[0] == 2  # highest score first


def test_one_trend_rule_on_the_two_weeks_shown(warehouse: Warehouse) -> None:
    """Rising and falling compare the accounts shown: this week against last week. A week in
    progress is falling only once it is short of last week's pace, rounded to whole accounts."""
    def trends(as_of: datetime) -> dict[int, tuple[int, int, str]]:
        return {r["cluster_id"]: (r["accounts_this_week"], r["accounts_last_week"], r["trend"])
                for r in demand(warehouse, as_of=as_of).iter_rows(named=True)}

    # Sunday noon of W48: one account each week is steady; 3 after 0 (seen before) is rising.
    assert trends(AS_OF) == {1: (1, 1, "steady"), 2: (3, 0, "rising"), 3: (1, 0, "new")}
    # W49 as it ends: no account after 3 (and after 1) is falling.
    end_of_w49 = datetime(2026, 12, 7, tzinfo=UTC)
    assert trends(end_of_w49) == {1: (1, 1, "steady"), 2: (0, 3, "falling"), 3: (0, 1, "falling")}
    # Monday 13:00 of W49: no week is short of a whole account yet, so nothing is falling.
    assert trends(datetime(2026, 11, 30, 13, tzinfo=UTC)) == {
        1: (1, 1, "steady"), 2: (0, 3, "steady"), 3: (0, 1, "steady")}
    # Wednesday 8:00, 2/7 of the week: 0 is short of 2/7 of 3 (1 account), not of 2/7 of 1 (0).
    assert trends(datetime(2026, 12, 2, 8, tzinfo=UTC)) == {
        1: (1, 1, "steady"), 2: (0, 3, "falling"), 3: (0, 1, "steady")}
    # Sunday 23:00, nearly over: 0 is short of last week's 1 already.
    assert trends(datetime(2026, 12, 6, 23, tzinfo=UTC))[3] == (0, 1, "falling")


def test_a_fixed_cluster_with_newer_reports_is_a_regression(warehouse: Warehouse) -> None:
    fixed = "UPDATE clusters SET status = 'fixed', fixed_at = ? WHERE id = ?"
    warehouse.con.execute(fixed, [AS_OF - timedelta(days=4), 2])  # reports 1–3 days ago came after
    warehouse.con.execute(fixed, [AS_OF - timedelta(days=2), 1])  # its latest report is 3 days old
    rows = {r["cluster_id"]: r for r in demand(warehouse, as_of=AS_OF).iter_rows(named=True)}
    assert rows[2]["regression"] is True
    assert rows[1]["regression"] is False
    assert rows[3]["regression"] is False  # never fixed


def test_figures_default_to_the_newest_report(warehouse: Warehouse) -> None:
    latest = demand(warehouse)
    assert latest.filter(cluster_id=1).row(0, named=True)["reports"] == 9  # includes the report "after" AS_OF


def test_this_week_is_the_iso_week_of_the_as_of_instant() -> None:
    sunday_noon = weeks(AS_OF)  # Sunday 29 November 2026
    assert (sunday_noon.this_week, sunday_noon.last_week, sunday_noon.name) == (
        datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 16, tzinfo=UTC), "2026-W48")
    # As of Monday's first instant, nothing of that Monday is counted: this week is the one before.
    assert weeks(datetime(2026, 11, 30, tzinfo=UTC)).name == "2026-W48"
    assert weeks(datetime(2026, 11, 30, 0, 0, 0, 1, tzinfo=UTC)).name == "2026-W49"
    assert weeks(datetime(2026, 11, 30)).as_of == datetime(2026, 11, 30, tzinfo=UTC)  # naive: UTC
    assert weeks(datetime(2027, 1, 3, 12, tzinfo=UTC)).name == "2026-W53"  # ISO years


def test_the_same_week_counts_the_same_whatever_instant_of_it(warehouse: Warehouse) -> None:
    def this_and_last(as_of: datetime) -> dict[int, tuple[int, int, str]]:
        return {r["cluster_id"]: (r["accounts_this_week"], r["accounts_last_week"], r["week"])
                for r in demand(warehouse, as_of=as_of).iter_rows(named=True)}

    sunday = this_and_last(AS_OF)
    assert this_and_last(datetime(2026, 11, 30, tzinfo=UTC)) == sunday  # the week's end: nothing new since
    # A week later the late report (Monday noon) is this week, and the W48 accounts last week.
    monday = this_and_last(datetime(2026, 11, 30, 13, tzinfo=UTC))
    assert monday[1] == (1, sunday[1][0], "2026-W49") and monday[2] == (0, sunday[2][0], "2026-W49")


def test_the_default_as_of_counts_the_newest_report(warehouse: Warehouse) -> None:
    (latest,) = warehouse.con.execute("SELECT max(received_at) FROM records").fetchall()[0]
    row = demand(warehouse).filter(cluster_id=1).row(0, named=True)
    assert row["as_of"] == default_as_of(warehouse) == latest + timedelta(microseconds=1)
    assert row["last_seen"] == latest and row["week"] == "2026-W49"
    assert demand(warehouse, as_of=latest).filter(cluster_id=1).row(0, named=True)["reports"] == row["reports"] - 1
