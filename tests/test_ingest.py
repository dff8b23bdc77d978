"""Ingestion into the warehouse: nothing lost, nothing twice, atomic batches, resumable."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import orjson
import polars as pl
import pytest

from feedback_insights.config import (
    Config,
    FileDropConfig,
    IngestConfig,
    PrivacyConfig,
    SqlTableConfig,
    WarehouseConfig,
)
from feedback_insights.ingest import (
    Processed,
    cursors,
    ingest,
    process,
    quarantine_entries,
    read_items,
    start_run,
    store_batch,
)
from feedback_insights.warehouse import Warehouse

from .conftest import write_jsonl
from .test_dialects import RFC026, SESSION_ROW

PRIVACY = PrivacyConfig(hmac_key="test-key-xxxxxxxxxxxxxxxxxxxxxxx")


def submission(n: int, **extra: Any) -> dict[str, Any]:
    return {"type": "bug", "goal": f"goal {n}", "message": f"message {n}", **extra}


def record(n: int, session: str | None = None, second: int = 0) -> dict[str, Any]:
    body = submission(n, **({"session_id": session} if session else {}))
    return {"id": f"fb_{n}_{second}", "received_at": f"2026-10-01T10:00:{second:02d}Z", "service": "svc",
            "account": f"acct_{n % 3}", "source": "http", "feedback": body}


def files_config(tmp_path: Path, folder: Path, batch_size: int = 10_000) -> Config:
    return Config(
        privacy=PRIVACY,
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        ingest=IngestConfig(batch_size=batch_size),
        sources=[FileDropConfig(kind="files", name="drop", path=folder, service="svc")],
    )


def rows(warehouse: Warehouse, query: str) -> list[tuple]:
    return warehouse.con.execute(query).fetchall()


def test_reingesting_is_a_no_op_and_a_renamed_copy_is_not_ingested_again(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", [record(i) for i in range(5)] + ["not an object", submission(9, type="nope")])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        first = ingest(config, wh)
        assert (first.counts.new, first.counts.quarantined) == (5, 2)
        (drop / "a.jsonl").rename(drop / "renamed.jsonl")
        second = ingest(config, wh)
        assert (second.counts.new, second.counts.already, second.counts.quarantined) == (0, 0, 0)
        assert rows(wh, "SELECT count(*) FROM records") == [(5,)]
        assert rows(wh, "SELECT count(*) FROM quarantine") == [(2,)]
        assert rows(wh, "SELECT status, new, quarantined FROM ingest_runs ORDER BY id") == [("ok", 5, 2), ("ok", 0, 0)]


def test_the_same_records_in_a_new_file_are_already_stored(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", [record(1), record(2), submission(3)])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        write_jsonl(drop / "b.jsonl", [record(1), record(2), submission(3), record(4)])
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.already) == (1, 3)


def test_an_afp_retry_is_kept_and_marked_duplicate_of_the_first(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    # Two collector records of one agent retry (same session, same content, different ids),
    # and two identical bare submissions with a session id in one file.
    write_jsonl(drop / "a.jsonl", [record(1, "sess_a", 5), record(1, "sess_a", 9), record(2, "sess_b"),
                                   submission(7, session_id="s7"), submission(7, session_id="s7")])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.retries) == (5, 2)
        marked = dict(rows(wh, "SELECT id, duplicate_of FROM records WHERE duplicate_of IS NOT NULL"))
        assert marked["fb_1_9"] == "fb_1_5"
        (bare_retry,) = [k for k in marked if k.startswith("fi_")]
        assert marked[bare_retry] == bare_retry.rsplit("-", 1)[0]
        # A later retry in a later delivery points at the same first report.
        write_jsonl(drop / "b.jsonl", [record(1, "sess_a", 30)])
        assert ingest(config, wh).counts.retries == 1
        assert rows(wh, "SELECT duplicate_of FROM records WHERE id = 'fb_1_30'") == [("fb_1_5",)]


def test_quarantine_keeps_the_raw_text_and_every_problem(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "a.jsonl").write_text('{"type": "bug", "goal": "", "message": "m", "severity": "high"}\n{"trunc": \n')
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        entries = {e["position"]: e for e in quarantine_entries(wh).to_dicts()}
    first, second = entries["line 1"], entries["line 2"]
    assert first["raw"] == '{"type": "bug", "goal": "", "message": "m", "severity": "high"}'
    assert {p["path"] for p in orjson.loads(first["problems"])} == {"goal", "severity"}
    assert first["dialect"] == "afp" and first["collector"] == "drop"
    assert second["raw"] == '{"trunc":' and "not valid JSON" in orjson.loads(second["problems"])[0]["message"]


def test_a_failure_inside_a_batch_leaves_no_partial_batch_and_the_cursor_unmoved(tmp_path: Path) -> None:
    items = list(read_items(write_jsonl(tmp_path / "a.jsonl", [record(1), record(2), "junk"])))
    processed = process(items, collector="drop", source_uri="a", received_at="2026-11-30T00:00:00Z")
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        run = start_run(wh)
        # The cursor write violates NOT NULL after records and quarantine rows were inserted.
        with pytest.raises(duckdb.ConstraintException):
            store_batch(wh, processed, collector="drop", source_uri="a", run_id=run, cursor={"file:x": None})  # type: ignore[dict-item]
        assert rows(wh, "SELECT count(*) FROM records") == [(0,)]
        assert rows(wh, "SELECT count(*) FROM quarantine") == [(0,)]
        assert cursors(wh, "drop") == {}
        counts = store_batch(wh, processed, collector="drop", source_uri="a", run_id=run, cursor={"file:x": "done"})
        assert (counts.new, counts.quarantined) == (2, 1)
        assert cursors(wh, "drop") == {"file:x": "done"}


def test_an_interrupted_file_resumes_after_its_last_stored_batch(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", [record(i) for i in range(10)])
    config = files_config(tmp_path, drop, batch_size=4)
    with Warehouse(config.warehouse.path) as wh:
        from feedback_insights.ingest import open_source
        from feedback_insights.ingest.sources.files import file_digest

        source = open_source(config.sources[0], batch_size=4)
        first = next(iter(source.batches({})))
        processed = process(first.items, collector="drop", source_uri=first.source_uri, received_at="2026-11-30T00:00:00Z")
        store_batch(wh, processed, collector="drop", source_uri=first.source_uri, run_id=start_run(wh), cursor=first.cursor)
        # ...the process dies here. The next run picks up at item 4.
        key = f"file:{file_digest(drop / 'a.jsonl')}"
        assert cursors(wh, "drop") == {key: "4"}
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.already) == (6, 0)
        assert cursors(wh, "drop") == {key: "done"}
        assert rows(wh, "SELECT count(DISTINCT id) FROM records") == [(10,)]


def test_json_arrays_and_parquet_files_are_read_too(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "rfc.json").write_bytes(orjson.dumps([RFC026, {**RFC026, "rating": "meh"}]))
    pl.DataFrame([{k: v for k, v in SESSION_ROW.items()}]).write_parquet(drop / "rows.parquet")
    (drop / "broken.json").write_text("[{")
    config = Config(
        privacy=PRIVACY,
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        sources=[FileDropConfig(kind="files", name="drop", path=drop, service="pags")],
    )
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.quarantined) == (2, 2)
        assert sorted(rows(wh, "SELECT dialect, service FROM records")) == [("rfc026", "identity-service"), ("session", "pags")]
        positions = sorted(e["position"] for e in quarantine_entries(wh).to_dicts())
        assert positions == ["document", "index 1"]


def make_session_db(path: Path, rows_: list[dict[str, Any]]) -> None:
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE IF NOT EXISTS agent_feedback (id TEXT PRIMARY KEY, ts INTEGER NOT NULL, user_id TEXT NOT NULL,"
        " instance_id TEXT NOT NULL, author TEXT NOT NULL DEFAULT 'user', surface TEXT NOT NULL, sentiment TEXT,"
        " body TEXT NOT NULL, trace_id TEXT, message_id TEXT, session_id TEXT, timeline_seq INTEGER,"
        " target_role TEXT, target_text TEXT, target_at TEXT, prompt_text TEXT, context TEXT,"
        " status TEXT NOT NULL DEFAULT 'open', issue_url TEXT)"
    )
    for row in rows_:
        con.execute(f"INSERT INTO agent_feedback ({','.join(row)}) VALUES ({','.join('?' * len(row))})", list(row.values()))
    con.commit()
    con.close()


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_sql_table_source_reads_new_rows_only(tmp_path: Path, engine: str) -> None:
    db = tmp_path / f"app.{engine}"
    first = [{**SESSION_ROW, "id": f"r{i}", "ts": 1_786_000_000_000 + i} for i in range(5)]
    later = [{**SESSION_ROW, "id": f"r{i}", "ts": 1_786_000_000_000 + i} for i in range(5, 8)]
    if engine == "sqlite":
        make_session_db(db, first)
    else:
        make_session_db(tmp_path / "tmp.sqlite", first)
        with duckdb.connect(str(db)) as con:
            con.register("src", pl.read_database("SELECT * FROM agent_feedback", sqlite3.connect(tmp_path / "tmp.sqlite")))
            con.execute("CREATE TABLE agent_feedback AS SELECT * FROM src")
    config = Config(
        privacy=PRIVACY,
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        ingest=IngestConfig(batch_size=2),
        sources=[SqlTableConfig(kind="sql", name="app", path=db, service="pags")],
    )
    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).counts.new == 5
        if engine == "sqlite":
            make_session_db(db, later)
        else:
            with duckdb.connect(str(db)) as con:
                for row in later:
                    con.execute("INSERT INTO agent_feedback (id, ts, user_id, instance_id, surface, body) VALUES (?,?,?,?,?,?)",
                                [row["id"], row["ts"], row["user_id"], row["instance_id"], row["surface"], row["body"]])
        summary = ingest(config, wh)
        # The first five are inside the look-back window: read again, recognised, not stored twice.
        assert (summary.counts.new, summary.counts.already) == (3, 5)
        assert rows(wh, "SELECT count(*), count(DISTINCT account) FROM records WHERE dialect = 'session'") == [(8, 1)]


def test_a_missing_source_is_one_clear_error_and_the_others_still_run(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", [record(1)])
    config = Config(
        privacy=PRIVACY,
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        sources=[FileDropConfig(kind="files", name="gone", path=tmp_path / "nope"),
                 FileDropConfig(kind="files", name="drop", path=drop, service="svc")],
    )
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        assert summary.counts.new == 1
        assert summary.errors == [f"gone: source 'gone': {tmp_path / 'nope'} does not exist"]
        assert rows(wh, "SELECT status FROM ingest_runs") == [("failed",)]


def test_migrations_are_recorded_and_not_reapplied(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        versions = rows(wh, "SELECT version FROM schema_migrations ORDER BY 1")
        assert versions == [(n,) for n in range(1, len(versions) + 1)] and len(versions) >= 3
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        assert rows(wh, "SELECT count(*) FROM schema_migrations") == [(len(versions),)]


def test_empty_processed_batch_only_moves_the_cursor(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        counts = store_batch(wh, Processed(), collector="c", source_uri="u", run_id=start_run(wh), cursor={"k": "v"})
        assert (counts.new, counts.quarantined) == (0, 0)
        assert cursors(wh, "c") == {"k": "v"}


def test_identical_copies_are_counted_across_batches_of_one_file(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    copy = submission(1, session_id="s1")
    write_jsonl(drop / "a.jsonl", [copy, submission(2), copy, copy])
    config = files_config(tmp_path, drop, batch_size=1)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.retries) == (4, 2)
        ids = [i for (i,) in rows(wh, "SELECT id FROM records WHERE content_hash = (SELECT content_hash FROM records WHERE id LIKE '%-2')")]
        base = min(ids, key=len)
        assert sorted(ids) == sorted([base, f"{base}-1", f"{base}-2"])


def test_worker_processes_store_exactly_what_in_process_ingestion_stores(tmp_path: Path) -> None:
    """Large batches go to worker processes; the warehouse must not be able to tell."""
    drop = tmp_path / "drop"
    drop.mkdir()
    lines: list[Any] = [record(i, f"s{i % 50}") for i in range(2_400)]
    lines += [record(i, f"s{i % 50}", second=1) for i in range(0, 2_400, 7)]  # retries
    lines += [submission(i % 5, session_id="dup") for i in range(20)] + ["junk", {"type": "nope"}]
    write_jsonl(drop / "big.jsonl", lines)
    results = []
    for workers in (0, 2):
        config = Config(
            privacy=PRIVACY,
            warehouse=WarehouseConfig(path=tmp_path / f"w{workers}.duckdb"),
            ingest=IngestConfig(batch_size=2_000, workers=workers),
            sources=[FileDropConfig(kind="files", name="drop", path=drop, service="svc")],
        )
        with Warehouse(config.warehouse.path) as wh:
            summary = ingest(config, wh)
            table = rows(wh, "SELECT id, duplicate_of, content_hash, original FROM records ORDER BY id")
            quarantined = rows(wh, "SELECT id, position, problems FROM quarantine ORDER BY id")
        results.append((summary.counts, table, quarantined))
    (serial_counts, serial_rows, serial_q), (pool_counts, pool_rows, pool_q) = results
    assert serial_counts == pool_counts
    assert serial_counts.new == len(lines) - 2 and serial_counts.retries > 300
    assert serial_rows == pool_rows and serial_q == pool_q


def test_odd_but_valid_timestamps_are_stored_and_unstorable_ones_quarantined(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    lower = {**record(1), "received_at": "2026-10-01t10:00:00z"}
    offset = {**record(2), "received_at": "2026-10-01T12:00:00+02:00"}
    far_future = {**SESSION_ROW, "id": "far", "ts": 10**17}
    write_jsonl(drop / "a.jsonl", [lower, offset, far_future, record(3)])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.quarantined, summary.errors) == (3, 1, [])
        stamps = dict(rows(wh, "SELECT id, strftime(received_at AT TIME ZONE 'UTC', '%H:%M') FROM records"))
        assert stamps["fb_1_0"] == "10:00" and stamps["fb_2_0"] == "10:00"
        (problems,) = rows(wh, "SELECT problems FROM quarantine")[0]
        assert "could not be normalised" in problems
        assert rows(wh, "SELECT status FROM ingest_runs") == [("ok",)]


def test_a_row_committed_late_with_an_older_ts_is_still_read(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    make_session_db(db, [{**SESSION_ROW, "id": f"r{i}", "ts": 1_786_000_000_000 + i * 1000} for i in range(5)])
    config = Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PRIVACY,
        sources=[SqlTableConfig(kind="sql", name="app", path=db, service="pags")],
    )
    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).counts.new == 5
        make_session_db(db, [{**SESSION_ROW, "id": "late", "ts": 1_786_000_000_000 + 2500}])
        summary = ingest(config, wh)
        assert summary.counts.new == 1 and summary.counts.already >= 2
        assert rows(wh, "SELECT count(*) FROM records") == [(6,)]
