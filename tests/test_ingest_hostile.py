"""Ingest under hostile and broken input: nothing lost, one bad report or file never stops the
others, every received report accounted for, no secret in what is kept, no orphan after a kill."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feedback_insights.collector import Store
from feedback_insights.config import (
    Config,
    FileDropConfig,
    HttpCollectorConfig,
    IngestConfig,
    PrivacyConfig,
    SqlTableConfig,
    WarehouseConfig,
)
from feedback_insights.core import MAX_DEPTH
from feedback_insights.ingest import UnreadableFile, ingest, quarantine_entries, read_blocks, read_items, replay
from feedback_insights.ingest._readers import KEPT_OF_A_CUT_LINE, MAX_LINE_BYTES
from feedback_insights.warehouse import Warehouse

from .collector_server import PIPELINE_KEY, running_collector
from .conftest import write_jsonl
from .test_dialects import AFS_SNAKE, SESSION_ROW
from .test_ingest import files_config, record, submission

PRIVACY = PrivacyConfig(hmac_key="test-key-xxxxxxxxxxxxxxxxxxxxxxx")


def nested(levels: int, leaf: Any = "deep") -> Any:
    """``{"m": {"m": … leaf}}`` with ``levels`` objects, built without recursion."""
    value = leaf
    for _ in range(levels):
        value = {"m": value}
    return value


def deep_line(levels: int) -> bytes:
    """The JSON text of a valid AFP submission whose metadata nests ``levels`` deep, written by
    hand: no encoder goes that deep."""
    return (b'{"type":"bug","goal":"g","message":"deep one","metadata":' + b'{"m":' * levels + b'1'
            + b"}" * levels + b"}")


def test_a_report_nested_hundreds_deep_is_quarantined_with_its_path_and_the_others_stored(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    lines = [orjson.dumps(submission(1)), deep_line(500), orjson.dumps(submission(2)), deep_line(5_000)]
    (drop / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (drop / "b.json").write_bytes(orjson.dumps([submission(3), nested(200)]))
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        goals = sorted(r[0] for r in wh.con.execute("SELECT goal FROM records").fetchall())
        entries = {(e["source_uri"].rsplit("/", 1)[-1], e["position"]): orjson.loads(e["problems"])
                   for e in quarantine_entries(wh).to_dicts()}
    assert summary.errors == [] and summary.counts.new == 3
    assert goals == ["goal 1", "goal 2", "goal 3"]
    depth_path = ".".join(["metadata", *["m"] * (MAX_DEPTH - 1)])
    assert entries[("a.jsonl", "line 2")] == [{"path": depth_path, "message": f"nests deeper than {MAX_DEPTH} levels"}]
    # 5,000 levels is past orjson's own limit: the line is not JSON, and says so.
    assert entries[("a.jsonl", "line 4")][0]["message"].startswith("not valid JSON")
    assert entries[("b.json", "index 1")][0]["message"] == f"nests deeper than {MAX_DEPTH} levels"


def test_deep_json_in_an_sql_row_and_in_a_collector_page_is_quarantined_too(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    columns = list(SESSION_ROW)
    con = sqlite3.connect(db)
    con.execute(f"CREATE TABLE agent_feedback ({', '.join(columns)})")
    deep_context = '{"m":' * 300 + "1" + "}" * 300
    for i, context in enumerate((SESSION_ROW.get("context"), deep_context)):
        row = {**SESSION_ROW, "id": f"row-{i}", "ts": SESSION_ROW["ts"] + i, "context": context}
        con.execute(f"INSERT INTO agent_feedback VALUES ({', '.join('?' * len(columns))})",
                    [row[c] if not isinstance(row[c], dict) else orjson.dumps(row[c]).decode() for c in columns])
    con.commit()
    con.close()
    with running_collector(tmp_path / "collector") as collector:
        # Written straight into the store: a collector of someone else's may hold anything.
        store = Store(collector.db)
        store.add({"id": "fb_deep", "received_at": "2026-10-01T10:00:00Z", "source": "http",
                   "feedback": {"type": "bug", "goal": "g", "message": "m", "metadata": nested(200)}}, None)
        store.add({"id": "fb_fine", "received_at": "2026-10-01T10:00:01Z", "source": "http",
                   "feedback": {"type": "bug", "goal": "g", "message": "fine"}}, None)
        os.environ["FI_TEST_PULL_KEY"] = PIPELINE_KEY
        config = Config(
            privacy=PRIVACY, warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
            sources=[SqlTableConfig(kind="sql", name="app", path=db, service="pags"),
                     HttpCollectorConfig(kind="http", name="acme", url=collector.url, key_env="FI_TEST_PULL_KEY",
                                         service="acme")],
        )
        with Warehouse(config.warehouse.path) as wh:
            summary = ingest(config, wh)
            stored = sorted(r[0] for r in wh.con.execute("SELECT id FROM records").fetchall())
            quarantined = sorted((e["collector"], e["position"]) for e in quarantine_entries(wh).to_dicts())
    assert summary.errors == []
    assert stored == ["fb_fine", "row-0"]
    assert quarantined == [("acme", "record fb_deep"), ("app", "agent_feedback.id=row-1")]


def _truncated_parquet(path: Path) -> None:
    pq.write_table(pa.table({"type": ["bug"] * 50, "goal": [f"g{i}" for i in range(50)], "message": ["m"] * 50}), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_file_that_cannot_be_read_is_one_entry_naming_it_and_the_drop_goes_on(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", [submission(1)])
    os.mkfifo(drop / "b.jsonl")  # not a regular file: refused at the open, never waited on
    _truncated_parquet(drop / "c.parquet")
    (drop / "d.json").write_text('[{"type": "bug", "goal": "g",')
    write_jsonl(drop / "e.jsonl", [submission(2)])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        first = ingest(config, wh)
        second = ingest(config, wh)
        goals = sorted(r[0] for r in wh.con.execute("SELECT goal FROM records").fetchall())
        entries = {Path(e["source_uri"]).name: e for e in quarantine_entries(wh).to_dicts()}
    assert first.errors == [] and second.errors == []
    assert goals == ["goal 1", "goal 2"]
    assert (first.counts.new, first.counts.quarantined) == (2, 3)
    refused = orjson.loads(entries["b.jsonl"]["problems"])[0]["message"]
    assert entries["b.jsonl"]["position"] == "file" and str(drop / "b.jsonl") in refused and "a FIFO" in refused
    assert "not a readable Parquet file" in orjson.loads(entries["c.parquet"]["problems"])[0]["message"]
    assert entries["d.json"]["position"] == "document"  # a broken JSON document: quarantined whole, as before
    # The broken Parquet file is done with (one entry); the refused one cannot even be hashed,
    # so each run tries it again and finds its one entry.
    assert (second.counts.new, second.counts.quarantined) == (0, 1)
    assert len(entries) == 3


def test_a_file_entry_replays_once_the_file_is_replaced(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    broken = drop / "c.parquet"
    _truncated_parquet(broken)
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        (entry,) = quarantine_entries(wh).to_dicts()
        assert replay(config, wh).still_invalid == [entry["id"]]  # still broken: kept, with its reason
        pq.write_table(pa.table({"type": ["bug"] * 50, "goal": [f"g{i}" for i in range(50)], "message": ["m"] * 50}),
                       broken)
        result = replay(config, wh)
        again = ingest(config, wh)  # the replay moved the fixed file's cursor: nothing read twice
        stored = wh.con.execute("SELECT count(*) FROM records").fetchall()[0]
        status = wh.con.execute("SELECT status FROM quarantine").fetchall()
    assert result.replayed == [entry["id"]] and result.counts.new == 50
    assert stored == (50,) and status == [("replayed",)]
    assert (again.counts.new, again.counts.already, again.counts.quarantined) == (0, 0, 0)


def test_every_invalid_report_is_its_own_entry_and_replay_restores_as_many_as_arrived(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    # 1,300 Agent Feedback Spec reports (13 texts, 100 copies each, no ids) into a source
    # that says they are AFP: every one is invalid as AFP.
    reports = [{**AFS_SNAKE, "summary": f"summary {i % 13}"} for i in range(1_300)]
    reports = [{k: v for k, v in r.items() if k not in ("id", "session_id")} for r in reports]
    write_jsonl(drop / "afs.jsonl", reports)
    strict = Config(privacy=PRIVACY, warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
                    sources=[FileDropConfig(kind="files", name="drop", path=drop, dialect="afp", service="s")])
    with Warehouse(strict.warehouse.path) as wh:
        summary = ingest(strict, wh)
        entries = wh.con.execute("SELECT count(*), count(DISTINCT raw) FROM quarantine").fetchall()[0]
        # The mapping is fixed (the source takes any dialect now) and every entry replayed.
        fixed = strict.model_copy(update={"sources": [strict.sources[0].model_copy(update={"dialect": "auto"})]})
        result = replay(fixed, wh)
        stored = wh.con.execute("SELECT count(*), count(DISTINCT summary) FROM records").fetchall()[0]
    assert summary.counts.quarantined == 1_300
    assert entries == (1_300, 13)
    assert len(result.replayed) == 1_300 and stored == (1_300, 13)


def test_a_line_over_the_limit_is_cut_and_quarantined_and_the_file_goes_on(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    huge = b'{"type":"bug","goal":"g","message":"' + b"x" * (MAX_LINE_BYTES + 10) + b'"}'
    (drop / "a.jsonl").write_bytes(orjson.dumps(submission(1)) + b"\n" + huge + b"\n" + orjson.dumps(submission(2)) + b"\n")
    items = list(read_items(drop / "a.jsonl"))
    assert [item.position for item in items] == ["line 1", "line 2", "line 3"]
    assert len(items[1].raw_text()) == KEPT_OF_A_CUT_LINE + 1 and items[1].size == len(huge) + 1
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        (entry,) = quarantine_entries(wh).to_dicts()
    assert (summary.counts.new, summary.counts.quarantined) == (2, 1)
    assert "over the 1 MiB a line may have" in orjson.loads(entry["problems"])[0]["message"]


SECRET_KEY = "ghp_" + "Zq7Lm2Xv9Rt4Wb8Ny3Hs6Kd1Pf5Gj0Ac2Te9"


def test_quarantined_problems_keep_no_secret_from_the_keys_they_name(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    unknown_key = {**submission(1), SECRET_KEY: "x", "contact": "jane.doe@example.org"}
    no_dialect = {SECRET_KEY: 1, "jane.doe@example.org": 2}
    write_jsonl(drop / "a.jsonl", [unknown_key, no_dialect])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        kept = wh.con.execute("SELECT problems::VARCHAR, raw FROM quarantine").fetchall()
    assert len(kept) == 2
    for problems, raw in kept:
        assert SECRET_KEY not in problems + raw and "jane.doe@example.org" not in problems + raw
    assert any("[REDACTED:" in problems for problems, _ in kept)


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid``, from /proc."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_ingest_leaves_no_process_behind_and_the_next_run_marks_it_aborted(tmp_path: Path, how: int) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "big.jsonl", [record(i, second=i % 60) for i in range(60_000)])
    config_file = tmp_path / "feedback-insights.toml"
    config_file.write_text(
        f'[privacy]\nhmac_key = "{PRIVACY.key()}"\n[warehouse]\npath = "wh.duckdb"\n[ingest]\nworkers = 2\nbatch_size = 2000\n'
        f'[[sources]]\nkind = "files"\nname = "drop"\npath = "{drop}"\n'
    )
    child = subprocess.Popen([sys.executable, "-m", "feedback_insights", "ingest", "--config", str(config_file)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 3:  # two workers and the resource tracker
        workers = _descendants(child.pid)
        time.sleep(0.1)
    assert len(workers) >= 3, f"the workers never started: {workers}"
    os.kill(child.pid, how)
    child.wait(timeout=30)
    deadline = time.monotonic() + 15
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(workers) == set()
    config = Config(privacy=PRIVACY, warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
                    ingest=IngestConfig(workers=0), sources=[FileDropConfig(kind="files", name="drop", path=drop)])
    with Warehouse(config.warehouse.path) as wh:
        after = ingest(config, wh)
        again = ingest(config, wh)
        runs = wh.con.execute("SELECT id, status FROM ingest_runs ORDER BY id").fetchall()
        stored = wh.con.execute("SELECT count(*) FROM records").fetchall()[0]
    assert runs[0] == (1, "aborted") and [status for _, status in runs[1:]] == ["ok", "ok"]
    assert "earlier run 1 never finished: marked aborted" in after.line()
    assert "aborted" not in again.line()  # said once
    assert stored == (60_000,)  # resumed from the batches the killed run had stored


def test_ids_that_carry_personal_data_are_kept_under_a_keyed_hash_and_the_summary_says_so(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    ids = ["jane.doe@example.org", "1234567890123456789", "4111111111111111"]  # an email, a snowflake, a "card"
    write_jsonl(drop / "a.jsonl", [{**record(i), "id": record_id} for i, record_id in enumerate(ids)])
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        first = ingest(config, wh)
        (drop / "b.jsonl").write_bytes((drop / "a.jsonl").read_bytes() + b"\n")  # the same reports again
        second = ingest(config, wh)
        stored = sorted(r[0] for r in wh.con.execute("SELECT id FROM records").fetchall())
    assert first.counts.new == 3 and second.counts.already == 3  # nothing merged, nothing lost
    assert "1 ids held personal data or a secret (stored as keyed hashes)" in first.line()
    assert "ids held" not in second.line()
    assert "1234567890123456789" in stored and "4111111111111111" in stored
    assert [i for i in stored if i.startswith("idh_")] and "jane.doe@example.org" not in stored


# -- what a drop may hold: regular files inside it, under names that are scrubbed ---------------

#: Text that lives outside the drop: it must reach no table and no byte of the warehouse file.
OUTSIDE_CANARY = "canary-outside-the-drop-5c1e"
EMAIL_NAME = "jane.doe@example.org.jsonl"
TOKEN_NAME = SECRET_KEY + ".jsonl"


def _hostile_drop(tmp_path: Path) -> Path:
    """A drop with a report file, links out of it (to /proc and to a file beside it), a link
    inside it, a FIFO, and files named like an email and a token."""
    outside = tmp_path / "outside"
    outside.mkdir()
    write_jsonl(outside / "secrets.jsonl", [submission(9, goal=OUTSIDE_CANARY), {"not": OUTSIDE_CANARY}])
    drop = tmp_path / "drop"
    (drop / "sub").mkdir(parents=True)
    write_jsonl(drop / "a.jsonl", [submission(1)])
    (drop / "env.jsonl").symlink_to("/proc/self/environ")
    (drop / "out.jsonl").symlink_to(outside / "secrets.jsonl")
    (drop / "up.jsonl").symlink_to(Path("..") / "outside" / "secrets.jsonl")
    write_jsonl(drop / "sub" / "b.jsonl", [submission(2)])  # no pattern matches sub/: read through the link only
    (drop / "inner.jsonl").symlink_to(Path("sub") / "b.jsonl")
    os.mkfifo(drop / "pipe.jsonl")
    write_jsonl(drop / EMAIL_NAME, [submission(3), {"type": "nope"}])
    write_jsonl(drop / TOKEN_NAME, [{"type": "nope"}])
    return drop


def test_a_drop_reads_only_regular_files_inside_it_and_stores_no_name_that_is_a_secret(tmp_path: Path) -> None:
    drop = _hostile_drop(tmp_path)
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        first = ingest(config, wh)
        second = ingest(config, wh)
        stored = wh.con.execute("SELECT goal, source_uri FROM records ORDER BY goal").fetchall()
        entries = quarantine_entries(wh).to_dicts()
        tables = [str(row) for table in ("records", "quarantine", "ingest_runs", "source_cursors")
                  for row in wh.con.execute(f"SELECT * FROM {table}").fetchall()]
    assert first.errors == [] and second.errors == []
    assert [goal for goal, _ in stored] == ["goal 1", "goal 2", "goal 3"]
    assert stored[1][1] == str(drop / "sub" / "b.jsonl")  # a link inside the drop is read as its target
    refused = {Path(e["source_uri"]).name: orjson.loads(e["problems"])[0]["message"]
               for e in entries if e["position"] == "file"}
    assert set(refused) == {"env.jsonl", "out.jsonl", "up.jsonl", "pipe.jsonl"}
    for name in ("env.jsonl", "out.jsonl", "up.jsonl"):
        assert "symbolic link out of the drop, not followed" in refused[name]
    assert "a FIFO, not a regular file" in refused["pipe.jsonl"]
    assert all(e["raw"] == "" for e in entries if e["position"] == "file")  # nothing of a target is kept
    # Refused files have no cursor: each run looks again and finds its one entry.
    assert (second.counts.new, second.counts.quarantined) == (0, 4) and len(entries) == 6
    kept = "\n".join(tables) + (tmp_path / "wh.duckdb").read_bytes().decode("latin-1")
    for secret in (OUTSIDE_CANARY, "FEEDBACK_INSIGHTS", "PATH=", "jane.doe@example.org", SECRET_KEY):
        assert secret not in kept, secret
    named = {e["position"]: e["source_uri"] for e in entries if e["position"] != "file"}
    assert sorted(named.values()) == sorted([str(drop / "[REDACTED:email:1]"), str(drop / "[REDACTED:github_token:1].jsonl")])
    assert stored[2][1] == str(drop / "[REDACTED:email:1]")  # the record's source_uri too


@pytest.mark.parametrize(
    ("path", "refusal"),
    [("/proc/self/environ", "on /proc or /sys, not a regular file"), ("/dev/null", "a character device, not a regular file")],
)
def test_the_readers_refuse_what_is_not_a_regular_file(path: str, refusal: str) -> None:
    with pytest.raises(UnreadableFile, match=refusal):
        list(read_blocks(Path(path), 10))


def test_the_readers_follow_no_symbolic_link_but_a_named_file_is_resolved(tmp_path: Path) -> None:
    """A drop's file (``read_blocks``) is never a link; a file the user names on the command
    line (``read_items``) is theirs to name through one."""
    write_jsonl(tmp_path / "a.jsonl", [submission(1)])
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "a.jsonl")
    with pytest.raises(UnreadableFile, match="is a symbolic link, not followed"):
        list(read_blocks(tmp_path / "link.jsonl", 10))
    assert [item.position for item in read_items(tmp_path / "link.jsonl")] == ["line 1"]
