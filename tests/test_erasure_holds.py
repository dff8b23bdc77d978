"""Erased means erased, and stays so: a forgotten report is never stored again by any source,
leaves no byte in the warehouse file, takes its retries, quarantined reports and mentions with
it, and is addressed by collector and id without ambiguity."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from feedback_insights.config import (
    Config,
    FileDropConfig,
    HttpCollectorConfig,
    PrivacyConfig,
    SqlTableConfig,
    WarehouseConfig,
)
from feedback_insights.ingest import ingest
from feedback_insights.privacy import Pseudonymiser
from feedback_insights.publish import AmbiguousRecord, forget, records_to_forget
from feedback_insights.warehouse import Warehouse

from .conftest import run_cli
from .test_forget import _tables_holding
from .test_session_sync import _change, _table

KEY = "erasure-test-key-xxxxxxxxxxxxxxx"


def _record(n: int, account: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    goal = "export the ledger" if text else f"goal {n}"
    return {"id": f"fb_{n}", "received_at": f"2026-10-01T10:00:{n:02d}Z", "service": "svc", "account": account,
            "source": "http", "feedback": {"type": "bug", "goal": goal, "message": text or f"message {n}"}, **extra}


def _drop(folder: Path, records: list[dict[str, Any]], name: str = "feed.jsonl") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    with path.open("ab") as handle:
        for item in records:
            handle.write(orjson.dumps(item) + b"\n")
    return path


def _config(tmp_path: Path, *sources: Any) -> Config:
    drop = FileDropConfig(kind="files", name="drop", path=tmp_path / "drop", service="svc")
    return Config(privacy=PrivacyConfig(hmac_key=KEY), warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
                  sources=list(sources) or [drop])


def _sql_source(tmp_path: Path, rows: int) -> tuple[Path, Config]:
    """An in-session table of ``rows`` rows, and a configuration that reads it."""
    db = tmp_path / "app.sqlite"
    _table(db, rows)
    return db, _config(tmp_path, SqlTableConfig(kind="sql", name="console", path=db, service="pags"))


def _ids(wh: Warehouse) -> list[str]:
    return [i for (i,) in wh.con.execute("SELECT id FROM records ORDER BY id").fetchall()]


def test_records_forgotten_from_a_drop_are_not_stored_again_when_the_file_grows(tmp_path: Path) -> None:
    _drop(tmp_path / "drop", [_record(1, "alice"), _record(2, "alice"), _record(3, "bob"), _record(4, "carol")])
    config = _config(tmp_path)
    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).counts.new == 4
        forget(config, wh, records_to_forget(config, wh, account="alice"), "dpo", "account closed")
        forget(config, wh, records_to_forget(config, wh, record="fb_3"), "dpo", "asked")
        # The drop file grows by one line: it is a new file to the drop, read from the start.
        _drop(tmp_path / "drop", [_record(5, "dave")])
        again = ingest(config, wh)
        stored = _ids(wh)
    assert stored == ["fb_4", "fb_5"]
    assert (again.counts.new, len(again.counts.erased)) == (1, 3)
    assert "3 erased reports skipped" in again.line()


def test_a_row_forgotten_from_an_sql_source_is_not_read_back_by_the_look_back(tmp_path: Path) -> None:
    db, config = _sql_source(tmp_path, 3)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        forget(config, wh, records_to_forget(config, wh, record="row-2"), "dpo", "asked")
        again = ingest(config, wh)  # nothing changed at the source; row-2 is inside the look-back
        stored = _ids(wh)
    assert (again.counts.new, len(again.counts.erased)) == (0, 1) and stored == ["row-0", "row-1"]


def test_the_same_short_text_from_another_account_is_still_stored(tmp_path: Path) -> None:
    _drop(tmp_path / "drop", [_record(1, "alice", "search is broken")])
    config = _config(tmp_path)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        forget(config, wh, records_to_forget(config, wh, account="alice"), "dpo", "account closed")
        # Another account files the same words (a new id): another person's report.
        _drop(tmp_path / "drop", [_record(2, "bob", "search is broken"), {**_record(3, "alice", "search is broken")}])
        again = ingest(config, wh)
        stored = wh.con.execute("SELECT id, account FROM records").fetchall()
    bob = Pseudonymiser(KEY)("bob")
    # Alice's words come back under a new id: her content mark (collector, account, text) stops them.
    assert stored == [("fb_2", bob)] and len(again.counts.erased) == 2


def test_erased_text_leaves_the_warehouse_file(tmp_path: Path) -> None:
    canary = "zebracanary7431 cannot export the ledger"
    _drop(tmp_path / "drop", [_record(1, "alice", canary), _record(2, "bob")])
    config = _config(tmp_path)
    path = config.warehouse.path
    with Warehouse(path) as wh:
        ingest(config, wh)
        wh.checkpoint()
        assert b"zebracanary7431" in path.read_bytes()  # the control: the text is there to find
        run = forget(config, wh, records_to_forget(config, wh, record="fb_1"), "dpo", "asked")
        assert _ids(wh) == ["fb_2"]  # the connection works on the new file
    assert run.erasure.records == 1
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("wh.duckdb")]
    assert b"zebracanary7431" not in b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("wh.duckdb"))
    assert sorted(leftovers) == ["wh.duckdb"]


def test_a_row_deleted_at_its_source_leaves_the_warehouse_file(tmp_path: Path) -> None:
    db, config = _sql_source(tmp_path, 3)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        wh.checkpoint()
        assert b"complaint number 2 about" in config.warehouse.path.read_bytes()
        _change(db, "DELETE FROM agent_feedback WHERE id = 'row-2'")
        assert ingest(config, wh).forgotten == 1
    assert b"complaint number 2 about" not in config.warehouse.path.read_bytes()


def test_forgetting_an_account_takes_its_quarantined_reports_and_its_mentions(tmp_path: Path) -> None:
    invalid = {**_record(1, "alice"), "feedback": {"type": "not-a-type", "goal": "g", "message": "bad one"}}
    # An AFS report filed from a shared account, its reporter in metadata.
    mentioned = {**_record(2, "shared-desk"), "source": "mcp",
                 "feedback": {"tool_name": "t", "summary": "s", "category": "bug", "metadata": {"reporter": "alice"}}}
    _drop(tmp_path / "drop", [invalid, mentioned, _record(3, "bob")])
    config = _config(tmp_path)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        assert wh.con.execute("SELECT count(*) FROM quarantine").fetchall() == [(1,)]
        target = records_to_forget(config, wh, account="alice")
        run = forget(config, wh, target, "dpo", "account closed")
        quarantined = wh.con.execute("SELECT count(*) FROM quarantine").fetchall()[0][0]
        stored = _ids(wh)
        again = ingest(config, wh)  # the file is unchanged: a new drop line would re-read it
        _drop(tmp_path / "drop", [_record(4, "erin")])
        grown = ingest(config, wh)
        quarantined_after = wh.con.execute("SELECT count(*) FROM quarantine").fetchall()[0][0]
    assert len(target.quarantine) == 1 and run.erasure.quarantined == 1 and quarantined == 0
    assert stored == ["fb_3"] and again.counts.new == 0
    assert grown.counts.new == 1 and len(grown.counts.erased) == 2 and quarantined_after == 0


def test_forgetting_a_report_takes_its_retries(tmp_path: Path) -> None:
    first = {**_record(1, "alice"), "feedback": {"type": "bug", "goal": "g", "message": "m", "session_id": "s1"}}
    retry = {**first, "id": "fb_9", "received_at": "2026-10-01T10:01:00Z"}
    _drop(tmp_path / "drop", [first, retry, _record(3, "bob")])
    config = _config(tmp_path)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        assert wh.con.execute("SELECT id, duplicate_of FROM records WHERE duplicate_of IS NOT NULL").fetchall() == [
            ("fb_9", "fb_1")]
        run = forget(config, wh, records_to_forget(config, wh, record="fb_1"), "dpo", "asked")
        left = wh.con.execute("SELECT count(*) FROM records WHERE duplicate_of = 'fb_1' OR id = 'fb_1'").fetchall()[0][0]
    assert run.erasure.records == 2 and left == 0


def test_a_record_is_addressed_by_its_collector_and_its_id_as_stored(tmp_path: Path) -> None:
    one = FileDropConfig(kind="files", name="drop", path=tmp_path / "drop", service="svc")
    other = FileDropConfig(kind="files", name="other", path=tmp_path / "other", service="svc")
    _drop(tmp_path / "drop", [{**_record(1, "alice"), "id": "other:123"}, {**_record(2, "bob"), "id": "123"}])
    _drop(tmp_path / "other", [{**_record(3, "carol"), "id": "123"}])
    config = _config(tmp_path, one, other)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        # "other:123" is an id of collector drop, not collector other's 123.
        assert records_to_forget(config, wh, record="other:123").keys == [("drop", "other:123")]
        with pytest.raises(AmbiguousRecord, match="drop, other"):
            records_to_forget(config, wh, record="123")
        assert records_to_forget(config, wh, record="123", collector="other").keys == [("other", "123")]
    (tmp_path / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "wh.duckdb"\n[privacy]\nhmac_key = "{KEY}"\n'
        '[[sources]]\nname = "drop"\nkind = "files"\npath = "drop"\nservice = "svc"\n'
        '[[sources]]\nname = "other"\nkind = "files"\npath = "other"\nservice = "svc"\n')
    ambiguous = run_cli("forget", "--record", "123", "--reason", "asked", cwd=tmp_path)
    assert ambiguous.returncode == 2 and "name one with --collector" in ambiguous.stderr
    done = run_cli("forget", "--collector", "other", "--record", "123", "--reason", "asked", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("forget: forgot 1 records"), done.stderr
    with Warehouse(config.warehouse.path) as wh:
        assert wh.con.execute("SELECT collector, id FROM records ORDER BY 1, 2").fetchall() == [
            ("drop", "123"), ("drop", "other:123")]


def test_a_sql_row_id_that_was_hashed_at_ingest_is_found_by_the_id_its_source_has_and_kept_nowhere(tmp_path: Path) -> None:
    db, config = _sql_source(tmp_path, 1)
    secret_id = "maria.lopez@example.com"
    con = sqlite3.connect(db)
    con.execute("UPDATE agent_feedback SET id = ?", [secret_id])
    con.commit()
    con.close()
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        [(stored,)] = wh.con.execute("SELECT id FROM records").fetchall()
        holding = _tables_holding(wh, secret_id)  # not even the source's cursor keeps it
        target = records_to_forget(config, wh, record=secret_id)
    assert stored.startswith("idh_") and target.keys == [("console", stored)] and holding == []


def test_forget_reaches_the_collector_that_sent_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .collector_server import INGEST_KEY, PIPELINE_KEY, running_collector
    from .test_collector import SUBMISSION, post, pull_all

    monkeypatch.setenv("ACME_PIPELINE_KEY", PIPELINE_KEY)
    with running_collector(tmp_path) as server:
        for n in (1, 2):
            record = {"id": f"fb_{n}", "received_at": f"2026-10-01T10:00:0{n}Z", "service": "acme-companies-api",
                      "account": f"customer-{n}", "source": "http", "feedback": {**SUBMISSION, "session_id": f"s{n}"}}
            assert post(server, "/v1/records", {"records": [record]}, authorization=f"Bearer {INGEST_KEY}").status_code == 200
        source = HttpCollectorConfig(kind="http", name="acme", url=server.url, key_env="ACME_PIPELINE_KEY")
        config = _config(tmp_path, source)
        with Warehouse(config.warehouse.path) as wh:
            ingest(config, wh)
            run = forget(config, wh, records_to_forget(config, wh, record="fb_1"), "dpo", "asked")
            again = ingest(config, wh)  # the collector's tombstone is read: nothing comes back
            stored = _ids(wh)
        held = [r["id"] for r in pull_all(server)]
    assert run.at_collectors == 1 and run.collector_errors == []
    assert held == ["fb_2"] and stored == ["fb_2"] and again.counts.new == 0


def test_forget_answers_a_pasted_id_in_one_bounded_line(tmp_path: Path) -> None:
    (tmp_path / "feedback-insights.toml").write_text(f'[warehouse]\npath = "wh.duckdb"\n[privacy]\nhmac_key = "{KEY}"\n')
    for pasted in ("a\nb\x01\x1b[31m", "z" * 5000):
        refused = run_cli("forget", "--record", pasted, "--reason", "asked", cwd=tmp_path)
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and len(refused.stderr) < 300
        assert refused.stderr.startswith("error: no such record: ")
