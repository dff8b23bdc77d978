"""Secrets and personal data never reach disk: canaries planted in every kind of field of every
kind of input, then a whole run (`feedback-insights run`: ingest, signals, clusters, drafts,
digest, with Prefect's state), then every table's live rows and the bytes of every file it wrote
are searched — the warehouse file and its write-ahead log included, since DuckDB keeps the
blocks of deleted or overwritten rows as they were: text stored raw and redacted afterwards
would be gone from the rows and still in the file. Then an account is forgotten, and its
report's words must be gone from the bytes of every file too."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import orjson
import pytest

from .conftest import run_cli, write_jsonl
from .test_dialects import SESSION_ROW

EMAIL = "canary.leak@example.org"
GITHUB_TOKEN = "ghp_" + "Cq7Lm2Xv9Rt4Wb8Ny3Hs6Kd1Pf5Gj0Ac2Te9"
AWS_KEY = "AKIA" + "QZ7CANARY4LEAK2X"
DB_PASSWORD = "Canary-Passw0rd-93f1"
DB_URL = f"postgres://svc:{DB_PASSWORD}@db.internal:5432/app"
ACCOUNT = "customer-canary-account-7"
CANARIES = (EMAIL, GITHUB_TOKEN, AWS_KEY, DB_PASSWORD, ACCOUNT)
#: No secret: kept, so finding it proves the bytes searched hold what the run stored (DuckDB
#: may compress a column; a search that could not see stored text would find no canary either).
KEPT = "quokka-marker-5521"
#: No secret either, in the reports of ``ACCOUNT`` alone: forgetting the account must take it
#: out of every file.
ERASED = "wombat-ledger-3307"


def _last_week(day: int) -> datetime:
    """10:00 UTC on ``day`` (0 is Monday) of the last complete week: the week ``run``'s digest
    is of, so that the digest quotes the planted reports."""
    today = datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0)
    return today - timedelta(days=today.weekday() + 7 - day)


def _inputs(folder: Path) -> None:
    drop = folder / "drop"
    drop.mkdir()
    problem = (f"The contacts export times out after 30 seconds for large accounts ({KEPT}); I used token "
               f"{GITHUB_TOKEN} and mailed {EMAIL} about it")
    records = [
        {"id": f"fb_canary_{i}", "received_at": _last_week(i).isoformat(), "service": "acme-api",
         "account": f"{ACCOUNT}-{i}" if i else ACCOUNT, "source": "http",
         "feedback": {"type": "performance", "goal": "Export all contacts",
                      "message": problem + ("" if i else f" ({ERASED})"),
                      "endpoint": "/contacts/export", "outcome": "blocked", "session_id": f"sess-{i}",
                      "metadata": {"db": DB_URL, GITHUB_TOKEN: "a key that is a token", "note": AWS_KEY}}}
        for i in range(5)
    ]
    invalid = [
        {"type": "bug", "goal": "g", "message": f"unknown keys {EMAIL} {KEPT}", GITHUB_TOKEN: 1, EMAIL: "x"},
        {AWS_KEY: 1, EMAIL: 2},  # no dialect: the message lists the keys
        {"type": "bug", "goal": "g", "message": DB_URL, "metadata": _nested(100, GITHUB_TOKEN)},
    ]
    write_jsonl(drop / "reports.jsonl", [*records, *invalid])
    db = folder / "session.sqlite"
    columns = list(SESSION_ROW)
    con = sqlite3.connect(db)
    con.execute(f"CREATE TABLE agent_feedback ({', '.join(columns)})")
    row = {**SESSION_ROW, "user_id": ACCOUNT, "ts": int(_last_week(2).timestamp() * 1000),
           "body": f"It leaked {AWS_KEY} and {EMAIL} in the answer ({ERASED})",
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


def _written(*folders: Path) -> dict[str, bytes]:
    """The bytes of every file under ``folders``."""
    return {str(p): p.read_bytes() for folder in folders for p in folder.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class Run:
    config: Path
    env: dict[str, str]
    folders: tuple[Path, ...]  # where it wrote: its own, the home and the temporary folder it was given
    texts: list[str]  # the warehouse's live rows once the run was done
    blobs: dict[str, bytes]  # every file's bytes once the run was done, and its stdout and stderr


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("canaries")
    inputs, work, home, temp = (root / name for name in ("inputs", "work", "home", "tmp"))
    for folder in (inputs, work, home, temp):
        folder.mkdir()
    _inputs(inputs)
    config = work / "feedback-insights.toml"
    config.write_text(
        '[privacy]\nhmac_key = "canary-test-key-xxxxxxxxxxxxxxxx"\n[warehouse]\npath = "feedback.duckdb"\n[digest]\nfolder = "digests"\n'
        f'[[sources]]\nkind = "files"\nname = "drop"\npath = "{inputs / "drop"}"\n'
        f'[[sources]]\nkind = "sql"\nname = "console"\npath = "{inputs / "session.sqlite"}"\nservice = "pags-console"\n'
    )
    # Whatever the run writes outside its folder (a home, temporary files) is searched too; the
    # exported model stays in the usual cache (it holds no report).
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
           "HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": cache}
    done = run_cli("run", "--config", str(config), cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    blobs = _written(work, home, temp)
    blobs["stdout"], blobs["stderr"] = done.stdout.encode(), done.stderr.encode()
    return Run(config, env, (work, home, temp), _warehouse_texts(work / "feedback.duckdb"), blobs)


def test_no_canary_reaches_any_table_or_the_bytes_of_any_file_a_whole_run_writes(whole_run: Run) -> None:
    texts, blobs = whole_run.texts, whole_run.blobs
    assert any(t.startswith("records: ") for t in texts) and any(t.startswith("quarantine: ") for t in texts)
    assert any(t.startswith("drafts: ") for t in texts), "the planted problem should have been drafted"
    names = [Path(name).name for name in blobs]
    assert "feedback.duckdb" in names and any(n.endswith(".html") for n in names)  # the warehouse, a digest
    assert any(n.endswith(".db") for n in names)  # Prefect's state
    warehouse = str(whole_run.config.parent / "feedback.duckdb")
    assert KEPT.encode() in blobs[warehouse] and ERASED.encode() in blobs[warehouse]  # the control: stored text is found
    assert [n for n, blob in blobs.items() if n.endswith(".html") and KEPT.encode() in blob]  # the digest quotes them
    for canary in CANARIES:
        assert not [t for t in texts if canary in t], f"{canary} in the warehouse"
        assert not [name for name, blob in blobs.items() if canary.encode() in blob], f"{canary} in a file"


def test_a_forgotten_accounts_words_leave_the_bytes_of_every_file(whole_run: Run) -> None:
    done = run_cli("forget", "--account", ACCOUNT, "--reason", "canary", "--by", "dpo", "--config",
                   str(whole_run.config), cwd=whole_run.config.parent, env=whole_run.env)
    assert done.returncode == 0, done.stderr
    before = [Path(name).name for name, blob in whole_run.blobs.items() if ERASED.encode() in blob]
    assert "feedback.duckdb" in before and any(n.endswith(".html") for n in before)  # the control: there to find
    blobs = _written(*whole_run.folders)
    assert [name for name, blob in blobs.items() if ERASED.encode() in blob] == []
    assert KEPT.encode() in blobs[str(whole_run.config.parent / "feedback.duckdb")]  # the other accounts' reports stay
