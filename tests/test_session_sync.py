"""In-session rows stay true after ingest: a row the owner triages, dismisses, files by hand or
deletes at the source is read again, and the warehouse follows it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from feedback_insights.config import Config, PrivacyConfig, SqlTableConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .test_dialects import SESSION_ROW

COLUMNS = [*SESSION_ROW, "issue_url", "updated_at"]


def _table(path: Path, rows: int) -> None:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE agent_feedback ({', '.join(COLUMNS)})")
    for i in range(rows):
        row = {**SESSION_ROW, "id": f"row-{i}", "ts": SESSION_ROW["ts"] + i, "body": f"complaint number {i} about the roster",
               "issue_url": None, "updated_at": "2026-11-20 10:00:00"}
        con.execute(f"INSERT INTO agent_feedback VALUES ({', '.join('?' * len(COLUMNS))})", [row[c] for c in COLUMNS])
    con.commit()
    con.close()


def _change(path: Path, sql: str, *params: object) -> None:
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()


def _config(tmp_path: Path, db: Path, lookback: int = 600) -> Config:
    return Config(privacy=PrivacyConfig(hmac_key="k" * 32), warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
                  sources=[SqlTableConfig(kind="sql", name="console", path=db, service="pags", lookback_seconds=lookback)])


def test_status_changes_and_deletions_at_the_source_reach_the_warehouse(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    _table(db, 4)
    config = _config(tmp_path, db)
    with Warehouse(config.warehouse.path) as wh:
        first = ingest(config, wh)
        score_new_records(wh)
        _change(db, "UPDATE agent_feedback SET status = 'dismissed', updated_at = '2026-11-21 09:00:00' WHERE id = 'row-0'")
        _change(db, "UPDATE agent_feedback SET status = 'filed', issue_url = ?, updated_at = '2026-11-21 09:01:00' "
                    "WHERE id = 'row-1'", "https://github.com/pags/console/issues/503")
        _change(db, "DELETE FROM agent_feedback WHERE id = 'row-3'")
        second = ingest(config, wh)
        third = ingest(config, wh)
        records = {r[0]: r[1:] for r in wh.con.execute("SELECT id, status, issue_url FROM records ORDER BY id").fetchall()}
        history = wh.con.execute(
            "SELECT id, status FROM record_status_history ORDER BY id, seen_at, status DESC").fetchall()
        signals = wh.con.execute("SELECT id FROM record_signals ORDER BY id").fetchall()
        erasures = wh.con.execute("SELECT actor, reason, records FROM erasures").fetchall()
    assert first.counts.new == 4
    assert records == {"row-0": ("dismissed", None), "row-1": ("filed", "https://github.com/pags/console/issues/503"),
                       "row-2": ("open", None)}
    assert ("row-0", "open") in history and ("row-0", "dismissed") in history and ("row-3", "open") not in history
    assert signals == [("row-0",), ("row-1",), ("row-2",)]
    assert erasures == [("source console", "deleted at the source", 1)]
    assert "status changes 2" in second.line() and "forgotten 1 (deleted at the source)" in second.line()
    assert "status changes" not in third.line() and "forgotten" not in third.line()  # nothing changed since


def test_a_table_that_lists_no_rows_erases_nothing_and_says_why(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    _table(db, 2)
    config = _config(tmp_path, db)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        _change(db, "DELETE FROM agent_feedback")
        emptied = ingest(config, wh)
        kept = wh.con.execute("SELECT count(*) FROM records").fetchall()
    assert kept == [(2,)]
    assert emptied.errors == ["console: the source lists no rows while 2 of its records are stored; nothing was "
                              "forgotten (a wrong path or table?). To forget them: feedback-insights forget"]


def test_a_row_filed_by_hand_attaches_its_cluster_to_that_issue(clustered_sample: Path, tmp_path: Path) -> None:
    from feedback_insights.config import embedded_default
    from feedback_insights.digest import Week, build
    from feedback_insights.drafts import draft_clusters
    from feedback_insights.publish import known_issue

    from .conftest import sample_copy

    path = sample_copy(clustered_sample, tmp_path)
    config = embedded_default(path)
    with Warehouse(path) as wh:
        filed_by_hand = wh.con.execute(
            """SELECT m.cluster_id, r.issue_url, r.received_at FROM cluster_members m JOIN records r USING (collector, id)
               WHERE m.view = 'reports' AND m.cluster_id IS NOT NULL AND r.status = 'filed' ORDER BY r.received_at"""
        ).fetchall()
        assert filed_by_hand, "the sample holds in-session rows filed by hand in a cluster"
        cluster_id, url, received = filed_by_hand[0]
        run = draft_clusters(config, wh)
        again = draft_clusters(config, wh)
        drafts = wh.con.sql("SELECT * FROM drafts WHERE cluster_id = ?", params=[cluster_id]).pl().to_dicts()
        digest = build(wh, Week(*received.isocalendar()[:2]))
    [draft] = drafts  # one draft for the cluster, and it is the issue filed by hand
    assert (draft["status"], draft["drafted_by"], draft["issue_url"]) == ("filed", "hand", url)
    assert draft["id"] in run.attached and again.attached == [] and again.drafted == []
    assert known_issue({**draft, "status": "acknowledged", "workaround": None}, "fi-cluster-")["url"] == url
    assert any(issue["issue_url"] == url for issue in digest.issues)


def test_write_back_moves_updated_at_and_audits_what_it_wrote(tmp_path: Path) -> None:
    from feedback_insights.publish import write_back

    db = tmp_path / "app.sqlite"
    _table(db, 2)
    config = _config(tmp_path, db).model_copy(update={"sources": [
        SqlTableConfig(kind="sql", name="console", path=db, service="pags", write_back=True)]})
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        wh.con.execute("INSERT INTO clusters (id, view, service, polarity, created_at, updated_at) "
                       "VALUES (900, 'reports', 'pags', 'problem', now(), now())")
        wh.con.execute("INSERT INTO cluster_members VALUES ('reports', 'console', 'row-0', NULL, 900, 'maintainer', now())")
        wh.con.execute("""INSERT INTO drafts (id, cluster_id, status, title, body, labels, drafted_by, accounts, reports,
                              blocking_reports, issue_url, created_at, updated_at)
                          VALUES (77, 900, 'filed', 't', 'b', [], 'template', 1, 1, 0, 'https://github.com/o/r/issues/9',
                                  now(), now())""")
        result = write_back(config, wh)
        audit = wh.con.execute("SELECT draft_id, collector, id, status, issue_url FROM write_backs").fetchall()
        # The row's updated_at moved, so the next ingest reads it again and the record follows.
        after = ingest(config, wh)
        record = wh.con.execute("SELECT status, issue_url FROM records WHERE id = 'row-0'").fetchall()
    assert result.sent == 1 and result.errors == []
    assert audit == [(77, "console", "row-0", "filed", "https://github.com/o/r/issues/9")]
    row = sqlite3.connect(db).execute("SELECT status, updated_at FROM agent_feedback WHERE id = 'row-0'").fetchall()[0]
    assert row[0] == "filed" and row[1] > "2026-11-20 10:00:00"
    assert after.counts.status_changes == 1 and record == [("filed", "https://github.com/o/r/issues/9")]


def test_dismissed_deleted_and_filed_by_hand_rows_reach_demand_drafts_and_digest(
    clustered_sample: Path, tmp_path: Path
) -> None:
    """The whole loop on the sample's own SQLite table: the owner dismisses one row of a cluster,
    deletes another and files a third by hand; one ingest later the warehouse, the demand
    figures, the drafts and the digest each say so."""
    import shutil

    from feedback_insights.clusters import demand
    from feedback_insights.config import embedded_default
    from feedback_insights.digest import Week, build
    from feedback_insights.drafts import draft_clusters

    from .conftest import SAMPLE, sample_copy

    path = sample_copy(clustered_sample, tmp_path)
    db = shutil.copyfile(SAMPLE / "session.sqlite", tmp_path / "session.sqlite")
    base = embedded_default(path)
    config = base.model_copy(update={"sources": [
        SqlTableConfig(kind="sql", name="sample-session", path=db, service="pags-console")]})
    with Warehouse(path) as wh:
        # A cluster with three in-session rows from three accounts that have no other report in
        # it, none filed yet: dismissing or deleting one takes its account out of the figures.
        cluster_id, rows = wh.con.execute(
            """SELECT cluster_id, list(id ORDER BY id) FROM (
                   SELECT m.cluster_id, r.account, min(r.id) AS id FROM cluster_members m JOIN records r USING (collector, id)
                   WHERE m.view = 'reports' AND m.cluster_id IN (
                       SELECT cluster_id FROM cluster_members m2 JOIN records r2 USING (collector, id)
                       WHERE m2.view = 'reports' GROUP BY ALL HAVING bool_and(r2.status <> 'filed'))
                   GROUP BY m.cluster_id, r.account
                   HAVING count(*) = 1 AND bool_and(r.collector = 'sample-session' AND r.status IN ('open', 'triaged')))
               GROUP BY cluster_id HAVING count(*) >= 3 ORDER BY cluster_id LIMIT 1"""
        ).fetchall()[0]
        dismissed, deleted, filed = rows[:3]
        before = demand(wh).filter(cluster_id=cluster_id).to_dicts()[0]
        received = wh.con.execute("SELECT max(received_at) FROM records WHERE id = ?", [filed]).fetchall()[0][0]
        summaries = dict(wh.con.execute("SELECT id, summary FROM records WHERE id IN (?, ?)", [dismissed, deleted]).fetchall())
    url = "https://github.com/pags-dev/platform/issues/777"
    _change(db, "UPDATE agent_feedback SET status = 'dismissed', updated_at = datetime('now') WHERE id = ?", dismissed)
    _change(db, "UPDATE agent_feedback SET status = 'filed', issue_url = ?, updated_at = datetime('now') WHERE id = ?",
            url, filed)
    _change(db, "DELETE FROM agent_feedback WHERE id = ?", deleted)
    with Warehouse(path) as wh:
        run = ingest(config, wh)
        stored = dict(wh.con.execute("SELECT id, status FROM records WHERE id IN (?, ?, ?)",
                                     [dismissed, deleted, filed]).fetchall())
        member = wh.con.execute("SELECT count(*) FROM cluster_members WHERE id = ?", [deleted]).fetchall()
        after = demand(wh).filter(cluster_id=cluster_id).to_dicts()[0]
        drafts = draft_clusters(config, wh)
        [draft] = wh.con.sql("SELECT * FROM drafts WHERE cluster_id = ?", params=[cluster_id]).pl().to_dicts()
        digest = build(wh, Week(*received.isocalendar()[:2]))
    assert run.errors == [] and "status changes 2" in run.line() and "forgotten 1" in run.line()
    assert stored == {dismissed: "dismissed", filed: "filed"} and member == [(0,)]
    # Demand: the dismissed and the deleted report leave every figure; the dismissed one is counted apart.
    assert (after["reports"], after["accounts"]) == (before["reports"] - 2, before["accounts"] - 2)
    assert (before["dismissed_reports"], after["dismissed_reports"]) == (0, 1)
    # Drafts: no draft of ours, the one filed by hand stands for the cluster.
    assert (draft["status"], draft["drafted_by"], draft["issue_url"]) == ("filed", "hand", url)
    assert draft["id"] in drafts.attached
    # Digest: the issue is listed as filed and quotes nothing the owner dismissed or deleted.
    assert any(issue["issue_url"] == url for issue in digest.issues)
    quotes = [row["quote"] for row in (*digest.top_problems, *digest.new, *digest.rising) if row.get("quote")]
    assert quotes and not [q for q in quotes for gone in summaries.values() if gone.startswith(q[:40])]
