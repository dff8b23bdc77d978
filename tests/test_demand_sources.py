"""Demand by who reported (agents, runtimes, people), the signals in the ranking, and dismissed
reports, on a hand-made warehouse whose every figure is known."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from feedback_insights.clusters import demand
from feedback_insights.config import Config, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.core.vocabulary import SOURCE_TIERS, sources_of
from feedback_insights.drafts import draft_clusters
from feedback_insights.ingest import ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .conftest import run_cli, write_jsonl

AS_OF = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SERVICE = "acme-companies-api"


def _at(days_ago: float) -> datetime:
    return AS_OF - timedelta(days=days_ago)


def _iso(days_ago: float) -> str:
    return _at(days_ago).isoformat().replace("+00:00", "Z")


def afs(key: str, account: str, days_ago: float, summary: str, source: str = "agent_authored") -> dict[str, Any]:
    return {"id": key, "received_at": _iso(days_ago), "service": SERVICE, "account": account, "source": "http",
            "feedback": {"tool_name": "/contacts/export", "summary": summary, "outcome": "partial_success",
                         "source": source}}


def session(key: str, user: str, days_ago: float, body: str, status: str = "open") -> dict[str, Any]:
    return {"id": key, "ts": int(_at(days_ago).timestamp() * 1000), "user_id": user, "instance_id": "5fab318d",
            "author": "user", "surface": "chat", "sentiment": "bad", "body": body, "status": status}


def rfc026(key: str, user: str, days_ago: float, comment: str) -> dict[str, Any]:
    return {"protocol_version": "2.0", "message_type": "FEEDBACK", "app_id": SERVICE, "request_id": key,
            "session_id": f"sess-{key}", "pseudonym_id": user, "timestamp": _iso(days_ago), "rating": "thumbs_down",
            "comment": comment, "context": {"user_query": "Export contacts", "ai_response_snippet": "Done!"},
            "relationship": {"type": "FEEDBACK_ON", "parent_id": key}}


PLAIN = "Cursor pagination repeats page 2."
HIGH = "Blocking: cannot create any item."  # severity language high, no gap
GAP = "Expected 25 records but got 24."  # a gap, medium language
BOTH = "Blocking: expected 25 records but got 24."

CLUSTERS: dict[int, list[dict[str, Any]]] = {
    # Every tier; one person's report was dismissed in triage.
    1: [afs("c1-a1", "acct_a1", 1, PLAIN), afs("c1-a2", "acct_a2", 2, PLAIN),
        afs("c1-r1", "acct_r1", 3, PLAIN, source="runtime_observed"),
        session("c1-h1", "usr_h1", 4, "The export cut my list short again"),
        session("c1-h2", "usr_h2", 0.5, "export broke", status="dismissed")],
    2: [session("c2-h3", "usr_h3", 2, "export is broken", status="dismissed")],  # nothing but a dismissed report
    3: [afs("c3", "acct_3", 2, HIGH)],
    4: [afs("c4", "acct_4", 2, GAP)],
    5: [afs("c5", "acct_5", 2, BOTH)],
    6: [afs("c6", "acct_6", 2, PLAIN)],
    7: [rfc026("c7", "usr-7", 2, "")],  # a thumbs-down without a comment: NULL signals
    # First seen 30 days ago, but that report was dismissed: the cluster is new.
    8: [session("c8-old", "usr_8a", 30, "export is slow", status="dismissed"), session("c8-new", "usr_8b", 3, "slow export")],
    # Three accounts, one dismissed: under the drafting threshold of three.
    9: [session("c9-x1", "usr_9a", 1, "wrong totals"), session("c9-x2", "usr_9b", 2, "wrong totals again"),
        session("c9-x3", "usr_9c", 3, "totals wrong", status="dismissed")],
}


def _key(obj: dict[str, Any]) -> str:
    return obj.get("request_id") or obj["id"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sources")
    drop = folder / "drop"
    drop.mkdir()
    write_jsonl(drop / "records.jsonl", [obj for objs in CLUSTERS.values() for obj in objs])
    config = _config(folder)
    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).counts.quarantined == 0
        score_new_records(wh)
        now = datetime.now(UTC)
        for cluster_id, objs in CLUSTERS.items():
            wh.con.execute("""INSERT INTO clusters (id, view, service, polarity, label, created_at, updated_at)
                              VALUES (?, 'reports', ?, 'problem', ?, ?, ?)""", [cluster_id, SERVICE, f"c{cluster_id}", now, now])
            wh.con.execute("""INSERT INTO cluster_members SELECT 'reports', collector, id, NULL, ?, 'hdbscan', ?
                              FROM records WHERE coalesce(request_id, id) IN (SELECT unnest(?))""",
                           [cluster_id, now, [_key(o) for o in objs]])
    (folder / "feedback-insights.toml").write_text(
        '[warehouse]\npath = "wh.duckdb"\n[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[[sources]]\nname = "drop"\nkind = "files"\n'
        f'path = "drop"\nservice = "{SERVICE}"\n'
    )
    return folder


def _config(folder: Path) -> Config:
    return Config(warehouse=WarehouseConfig(path=folder / "wh.duckdb"), privacy=PrivacyConfig(hmac_key="k" * 32),
                  sources=[FileDropConfig(kind="files", name="drop", path=folder / "drop", service=SERVICE)])


@pytest.fixture
def warehouse(folder: Path):
    with Warehouse(folder / "wh.duckdb") as wh:
        yield wh


def _rows(wh: Warehouse, **options: Any) -> dict[int, dict[str, Any]]:
    return {r["cluster_id"]: r for r in demand(wh, as_of=AS_OF, **options).iter_rows(named=True)}


# --- the tiers ------------------------------------------------------------------------------------


def test_the_tiers_cover_every_source_once() -> None:
    assert SOURCE_TIERS == {"agent": ("agent_authored", "agent_solicited"),
                            "runtime": ("server_observed", "runtime_observed"), "human": ("human_authored",)}
    assert sources_of("human") == ("human_authored",)
    assert sources_of("server_observed") == ("server_observed",)  # a single source is a filter too
    with pytest.raises(ValueError, match="--source must be one of: agent, runtime, human, agent_authored"):
        sources_of("bots")


def test_demand_splits_accounts_and_reports_by_tier(warehouse: Warehouse) -> None:
    first = _rows(warehouse)[1]
    assert (first["accounts_agent"], first["accounts_runtime"], first["accounts_human"]) == (2, 1, 1)
    assert (first["reports_agent"], first["reports_runtime"], first["reports_human"]) == (2, 1, 1)


def test_demand_filtered_by_source_counts_only_that_tier(warehouse: Warehouse) -> None:
    human = _rows(warehouse, sources=sources_of("human"))
    assert set(human) == {1, 7, 8, 9}
    assert (human[1]["accounts"], human[1]["reports"], human[1]["accounts_agent"]) == (1, 1, 0)
    assert human[1]["score"] < _rows(warehouse)[1]["score"]
    runtime = _rows(warehouse, sources=sources_of("runtime"))
    assert set(runtime) == {1} and runtime[1]["accounts"] == 1


# --- the signals in the ranking ---------------------------------------------------------------------


def test_severity_language_and_an_expectation_gap_each_weigh_half_as_much_again(warehouse: Warehouse) -> None:
    signals = dict(warehouse.con.execute(
        """SELECT coalesce(r.request_id, r.id), [s.severity_language, CAST(s.expectation_gap AS VARCHAR)]
           FROM records r JOIN record_signals s USING (collector, id)""").fetchall())
    assert (signals["c3"], signals["c4"], signals["c5"], signals["c6"]) == (
        ["high", "false"], ["medium", "true"], ["high", "true"], ["medium", "false"])
    assert signals["c7"] == [None, None]
    rows = _rows(warehouse)
    base = 0.5 ** (2 / 14)  # one account, severity unknown (weight 1), seen 2 days ago
    assert rows[6]["score"] == pytest.approx(base, abs=1e-3)
    assert rows[3]["score"] == pytest.approx(1.5 * base, abs=1e-3)
    assert rows[4]["score"] == pytest.approx(1.5 * base, abs=1e-3)
    assert rows[5]["score"] == pytest.approx(2.25 * base, abs=1e-3)
    assert rows[7]["score"] == pytest.approx(base, abs=1e-3)  # NULL signals add nothing, take nothing
    assert (rows[5]["expectation_gaps"], rows[5]["high_severity_language"]) == (1, 1)


# --- dismissed reports ----------------------------------------------------------------------------


def test_a_dismissed_report_leaves_every_demand_figure(warehouse: Warehouse) -> None:
    rows = _rows(warehouse)
    first = rows[1]
    assert (first["accounts"], first["reports"], first["accounts_this_week"], first["dismissed_reports"]) == (4, 4, 4, 1)
    assert first["last_seen"] == _at(1)  # the dismissed report was as recent, and does not count
    assert 2 not in rows  # nothing but a dismissed report: no demand at all
    assert (rows[8]["trend"], rows[8]["first_seen"], rows[8]["accounts"]) == ("new", _at(3), 1)
    assert rows[9]["accounts"] == 2


def test_drafting_thresholds_count_no_dismissed_account(folder: Path) -> None:
    config = _config(folder)
    with Warehouse(config.warehouse.path) as wh:
        draft_clusters(config, wh)
        drafted = {row[0] for row in wh.con.execute("SELECT cluster_id FROM drafts").fetchall()}
        wh.con.execute("DELETE FROM draft_actions; DELETE FROM drafts")
    assert 1 in drafted  # four live accounts
    assert 9 not in drafted  # two live accounts and a dismissed one


def test_clusters_show_lists_dismissed_reports_marked_as_such(folder: Path) -> None:
    done = run_cli("clusters", "show", "1", "--config", str(folder / "feedback-insights.toml"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  accounts: 4" in lines and "  dismissed_reports: 1" in lines
    assert "  accounts_human: 1" in lines
    dismissed = [line for line in lines if "c1-h2" in line]
    assert len(dismissed) == 1 and "dismissed" in dismissed[0]
    assert not any("dismissed" in line for line in lines if "c1-h1" in line)
    only = run_cli("clusters", "show", "2", "--config", str(folder / "feedback-insights.toml"))
    assert only.returncode == 0, only.stderr
    assert "  accounts: 0" in only.stdout.splitlines() and "c2-h3" in only.stdout and "dismissed" in only.stdout


def test_clusters_list_filters_by_source(folder: Path) -> None:
    toml = str(folder / "feedback-insights.toml")
    done = run_cli("clusters", "list", "--source", "human", "--json", "--as-of", AS_OF.isoformat(), "--config", toml)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["cluster_id"] for r in rows} == {1, 7, 8, 9}
    assert all(r["accounts"] == r["accounts_human"] for r in rows)
    table = run_cli("clusters", "list", "--source", "agent", "--config", toml)
    assert table.returncode == 0, table.stderr
    assert "agents / runtimes / humans" in table.stdout and "2/0/0" in table.stdout  # the split's column
    bad = run_cli("clusters", "list", "--source", "bots", "--config", toml)
    assert bad.returncode == 2 and "--source must be one of: agent, runtime, human" in bad.stderr
