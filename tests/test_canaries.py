"""Secrets and personal data never reach disk: canaries planted in every kind of field of every
kind of input, then a whole run (`feedback-insights run`: ingest, signals, clusters, drafts,
digest, with Prefect's state), then every table and every file it wrote is searched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import orjson

from .conftest import run_cli, write_jsonl
from .test_dialects import SESSION_ROW

EMAIL = "canary.leak@example.org"
GITHUB_TOKEN = "ghp_" + "Cq7Lm2Xv9Rt4Wb8Ny3Hs6Kd1Pf5Gj0Ac2Te9"
AWS_KEY = "AKIA" + "QZ7CANARY4LEAK2X"
DB_PASSWORD = "Canary-Passw0rd-93f1"
DB_URL = f"postgres://svc:{DB_PASSWORD}@db.internal:5432/app"
ACCOUNT = "customer-canary-account-7"
CANARIES = (EMAIL, GITHUB_TOKEN, AWS_KEY, DB_PASSWORD, ACCOUNT)


def _inputs(folder: Path) -> None:
    drop = folder / "drop"
    drop.mkdir()
    problem = (f"The contacts export times out after 30 seconds for large accounts; I used token {GITHUB_TOKEN} "
               f"and mailed {EMAIL} about it")
    records = [
        {"id": f"fb_canary_{i}", "received_at": f"2026-11-1{i}T10:00:00Z", "service": "acme-api",
         "account": f"{ACCOUNT}-{i}" if i else ACCOUNT, "source": "http",
         "feedback": {"type": "performance", "goal": "Export all contacts", "message": problem,
                      "endpoint": "/contacts/export", "outcome": "blocked", "session_id": f"sess-{i}",
                      "metadata": {"db": DB_URL, GITHUB_TOKEN: "a key that is a token", "note": AWS_KEY}}}
        for i in range(5)
    ]
    invalid = [
        {"type": "bug", "goal": "g", "message": f"unknown keys {EMAIL}", GITHUB_TOKEN: 1, EMAIL: "x"},
        {AWS_KEY: 1, EMAIL: 2},  # no dialect: the message lists the keys
        {"type": "bug", "goal": "g", "message": DB_URL, "metadata": _nested(100, GITHUB_TOKEN)},
    ]
    write_jsonl(drop / "reports.jsonl", [*records, *invalid])
    db = folder / "session.sqlite"
    columns = list(SESSION_ROW)
    con = sqlite3.connect(db)
    con.execute(f"CREATE TABLE agent_feedback ({', '.join(columns)})")
    row = {**SESSION_ROW, "user_id": ACCOUNT, "body": f"It leaked {AWS_KEY} and {EMAIL} in the answer",
           "context": orjson.dumps({"dictation": f"my password is {DB_PASSWORD}", "token": GITHUB_TOKEN}).decode()}
    con.execute(f"INSERT INTO agent_feedback VALUES ({', '.join('?' * len(columns))})", [row[c] for c in columns])
    con.commit()
    con.close()


def _nested(levels: int, leaf: str) -> object:
    value: object = leaf
    for _ in range(levels):
        value = {"m": value}
    return value


def _warehouse_texts(path: Path) -> list[str]:
    """Every value of every table, as text."""
    con = duckdb.connect(str(path), read_only=True)
    texts = []
    for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
            texts.append(f"{table}: " + " | ".join(map(str, row)))
    con.close()
    return texts


def test_no_canary_reaches_any_table_or_file_a_whole_run_writes(tmp_path: Path) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    _inputs(inputs)
    work = tmp_path / "work"
    work.mkdir()
    (work / "feedback-insights.toml").write_text(
        '[privacy]\nhmac_key = "canary-test-key"\n[warehouse]\npath = "feedback.duckdb"\n[digest]\nfolder = "digests"\n'
        f'[[sources]]\nkind = "files"\nname = "drop"\npath = "{inputs / "drop"}"\n'
        f'[[sources]]\nkind = "sql"\nname = "console"\npath = "{inputs / "session.sqlite"}"\nservice = "pags-console"\n'
    )
    done = run_cli("run", "--config", str(work / "feedback-insights.toml"), cwd=work)
    assert done.returncode == 0, done.stderr
    texts = _warehouse_texts(work / "feedback.duckdb")
    assert any(t.startswith("records: ") for t in texts) and any(t.startswith("quarantine: ") for t in texts)
    assert any(t.startswith("drafts: ") for t in texts), "the planted problem should have been drafted"
    files = [p for p in work.rglob("*") if p.is_file() and p.suffix not in (".duckdb", ".wal")]
    assert any(p.suffix == ".html" for p in files) and any(p.name.endswith(".db") for p in files)  # digest, Prefect
    blobs = {str(p): p.read_bytes() for p in files}
    blobs["stdout"], blobs["stderr"] = done.stdout.encode(), done.stderr.encode()
    for canary in CANARIES:
        assert not [t for t in texts if canary in t], f"{canary} in the warehouse"
        assert not [name for name, blob in blobs.items() if canary.encode() in blob], f"{canary} in a file"
