"""Erased means erased, end to end: canaries planted in every kind of source, found first
everywhere they should be (the positive control), then forgotten and looked for again.

What it does, in a temporary folder, with the CLI as a user runs it (each command its own
process, Prefect on its own ``PREFECT_HOME`` there):

1. Sources: the embedded sample (copied), a file drop, an in-session SQLite table and a real
   collector (``feedback-insights collector serve`` on 127.0.0.1, reports POSTed to it by a
   service's ingest key and by an agent's key, pulled by the pipeline), and GitHub as the
   fake the tests use (``tests/github_fake.py``, in this process, on 127.0.0.1). Distinct
   random words (canaries) sit in summary/message, goal, detail, expected, evidence, metadata
   fields, ids, session and request ids and accounts of a handful of reports of each source:
   some one account's reports (forgotten by ``--account``), some single records (forgotten by
   ``--record``, ``--collector C --record``), one an account named only in another report's
   ``metadata.reporter``. Most are one problem (a ledger export that times out), so they are
   clustered, drafted, quoted in the digest, filed on GitHub, and posted back to the collector
   as a known issue.
2. ``run``; every pending draft approved; ``publish``; a blocking report arrives at the
   collector and ``run`` again (a demand-update comment quoting it is posted); the digest of the
   week before is written too (as last week's scheduled run would have); ``warehouse export``.
3. **Positive control**: every canary is looked for in every place — every column of every
   table of the warehouse (``information_schema.columns``), the warehouse file's bytes (and
   its ``.wal``), the collector's rows and its SQLite files' bytes (main, ``-wal``, ``-shm``),
   its request log, GitHub's issue titles, bodies and comments, the export (Parquet decoded,
   and every file's bytes), the digests folder, Prefect's home (every file's bytes) and every
   other file the pipeline left in the folder. A canary the pipeline stores that is found in no
   table fails the control. (Raw account names are expected nowhere — accounts are
   pseudonymised, in another report's ``metadata.reporter`` too — and found anywhere fail it;
   their pseudonyms are canaries of their own.)
4. ``forget`` (``--account``, ``--record``, ``--collector C --record``, each with ``--reason``),
   timed; every place searched again. Then the same sources are read again — the drop file
   grown by one line (so it is read from the start), the forgotten in-session rows triaged by
   their owner (so the look-back reads them again) — with ``ingest`` and ``run``, a fresh
   export is made, and every place is searched a last time. Every cell of that last column must
   be 0; the export made before the forget is the user's own copy and is shown, not counted.
5. What erasure costs: each ``forget``'s wall time (beside a no-op command's, which is Python
   and the CLI starting), and ``Warehouse.rewrite()`` alone on this warehouse and on bigger ones
   (records generated as ``benchmarks/ingest.py`` does, ingested for real, each with a 384-d
   embedding row of random floats: the size real ones have), with the file size; an
   in-process ``forget`` of one record at each size; and the first ``forget --account`` again,
   in process on a copy of the warehouse as it was, step by step.

Last (unless ``--no-redeliver``), a service sends the forgotten records to the collector once
more and ``ingest`` runs: neither the collector (its own ledger refuses them as ``erased``) nor
the pipeline may store them again.

Run by hand: ``.venv/bin/python benchmarks/erasure.py [--sizes 10000 50000] [--keep]``.
Exit status 1 when the control fails or any canary survives.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the GitHub fake of the tests
sys.path.insert(0, str(Path(__file__).resolve().parent))  # ingest.py's generator

from ingest import afp_record  # noqa: E402

from feedback_insights.collector import hash_key  # noqa: E402
from feedback_insights.config import (  # noqa: E402
    Config,
    FileDropConfig,
    IngestConfig,
    PrivacyConfig,
    WarehouseConfig,
)
from feedback_insights.privacy import Pseudonymiser  # noqa: E402
from tests.github_fake import GitHubFake, running_github  # noqa: E402

SERVICE = "ledgerly-api"
CONSOLE_SERVICE = "ledgerly-console"
ENDPOINT = "/v1/ledgers/export"
REPO = "ledgerly/feedback"
AGENT_KEY = "erasure-agent-key"
INGEST_KEY = "erasure-ingest-key"
PIPELINE_KEY = "erasure-pipeline-key"
GITHUB_TOKEN = "erasure-github-token"
COLLECTOR_KEY_ENV = "ERASURE_BENCH_COLLECTOR_KEY"
GITHUB_TOKEN_ENV = "ERASURE_BENCH_GITHUB_TOKEN"
SAMPLE_FILES = ("afp_records.jsonl", "afs.jsonl", "sep2369.jsonl", "rfc026.json", "afp_submissions.jsonl",
                "session.sqlite")
SESSION_COLUMNS = ("id", "ts", "user_id", "instance_id", "author", "surface", "sentiment", "body", "trace_id",
                   "message_id", "session_id", "target_role", "target_text", "prompt_text", "context", "status",
                   "issue_url", "updated_at")

#: Places, in the order the table shows them: key → what is searched.
PLACES = {
    "tables": "warehouse: every column of every table (SQL)",
    "wh-bytes": "warehouse file bytes (.duckdb, .wal, siblings)",
    "coll-rows": "collector: every column of every table (SQL)",
    "coll-bytes": "collector SQLite bytes (main, -wal, -shm)",
    "coll-log": "collector request log",
    "github": "GitHub: issue titles, bodies, comments",
    "export": "fresh export (Parquet decoded + bytes)",
    "digests": "digests folder (every file)",
    "prefect": "Prefect home (every file's bytes)",
    "other": "every other file the pipeline left",
}
USERS_COPY = "export-before"
USERS_COPY_LABEL = "export made before the forget (the user's own copy: not counted)"
REDELIVERED = "coll-redelivered"
REDELIVERED_TABLES = "tables-redelivered"


# --------------------------------------------------------------------------------------------
# Canaries and the reports that carry them
# --------------------------------------------------------------------------------------------

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def word(taken: set[str]) -> str:
    """A random pronounceable word of 10 letters no other canary contains or is contained in
    (no scrubber rule takes it for a secret, no tokenizer splits it oddly)."""
    while True:
        w = "".join(secrets.choice(_CONSONANTS) + secrets.choice(_VOWELS) for _ in range(5))
        if not any(w in t or t in w for t in taken):
            taken.add(w)
            return w


@dataclass
class Canary:
    needle: str
    source: str
    field: str
    forget: str
    #: Whether the pipeline stores it (a raw account is pseudonymised: expected nowhere).
    expected: bool = True


@dataclass
class Plan:
    """The canaries, the reports that carry them, and the forget commands that erase them."""

    key: str
    digest_week: date  # Monday of the last complete ISO week
    canaries: list[Canary] = field(default_factory=list)
    taken: set[str] = field(default_factory=set)
    drop: list[dict[str, Any]] = field(default_factory=list)
    drop_late: list[dict[str, Any]] = field(default_factory=list)
    collector_records: list[dict[str, Any]] = field(default_factory=list)
    collector_growth: list[dict[str, Any]] = field(default_factory=list)
    agent_submissions: list[dict[str, Any]] = field(default_factory=list)
    agent_accounts: dict[str, str] = field(default_factory=dict)  # agent key → account
    rows: list[dict[str, Any]] = field(default_factory=list)
    forgets: list[list[str]] = field(default_factory=list)
    #: Rows the owner triages after the forget (so the look-back reads them again).
    forgotten_rows: list[str] = field(default_factory=list)

    def canary(self, source: str, what: str, forget: str, expected: bool = True) -> str:
        w = word(self.taken)
        self.canaries.append(Canary(w, source, what, forget, expected))
        return w

    def account(self, source: str, forget: str, mentioned: bool = False) -> str:
        """A canary account: its raw name (expected nowhere: pseudonymised, in a
        ``metadata.reporter`` too) and its pseudonym (where the pipeline keeps it)."""
        raw = self.canary(source, "account (raw" + (", also a metadata.reporter)" if mentioned else ")"), forget,
                          expected=False)
        pseudonym = Pseudonymiser(self.key)(raw)
        self.canaries.append(Canary(pseudonym.lower(), source, "account (its pseudonym)", forget))
        return raw

    def at(self, week: int, day: int, hour: int) -> datetime:
        """A time in the digest's week (``week`` 0) or the week before (-1)."""
        return datetime.combine(self.digest_week + timedelta(weeks=week, days=day), datetime.min.time(),
                                UTC) + timedelta(hours=hour, minutes=7)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _afp(plan: Plan, src: str, forget: str, account: str, when: datetime, *, rid: str | None = None,
         outcome: str = "degraded", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    c = plan.canary
    feedback: dict[str, Any] = {
        "type": "bug",
        "goal": f"Export the {c(src, 'goal', forget)} ledger for the quarterly close",
        "message": f"Exporting the {c(src, 'message', forget)} ledger through {ENDPOINT} times out after 30 seconds "
                   "with a 504 once it holds more than 5,000 entries",
        "endpoint": ENDPOINT, "method": "GET", "outcome": outcome,
        "agent": {"name": "ledger-agent", "model": "claude-opus-5"},
        **(extra or {}),
    }
    return {"id": rid or f"fb_{c(src, 'id', forget)}", "received_at": iso(when), "service": SERVICE,
            "account": account, "source": "http", "feedback": feedback}


def _afs(plan: Plan, src: str, forget: str, account: str, when: datetime, metadata_field: str,
         metadata_value: str | None = None) -> dict[str, Any]:
    c = plan.canary
    feedback = {
        "tool_name": ENDPOINT,
        "summary": f"Ledger export of {c(src, 'summary', forget)} times out after 30 s with a 504",
        "detail": f"The export of the {c(src, 'detail', forget)} ledger stops at 30 seconds every time; "
                  "smaller ledgers export fine",
        "category": "rate_limit_or_timeout",
        "outcome": "partial_success", "severity": "medium", "source": "agent_authored",
        "metadata": {metadata_field: metadata_value or c(src, f"metadata.{metadata_field}", forget)},
    }
    return {"id": f"fb_{c(src, 'id', forget)}", "received_at": iso(when), "service": SERVICE, "account": account,
            "source": "mcp", "feedback": feedback}


def _keeper(n: int, when: datetime) -> dict[str, Any]:
    """A report of the same problem with no canary, from an account nobody forgets."""
    return {"id": f"fb_keeper_{n}", "received_at": iso(when), "service": SERVICE, "account": f"acct-keeper-{n}",
            "source": "http", "feedback": {
                "type": "bug", "goal": "Export the main ledger for the quarterly close",
                "message": f"The ledger export at {ENDPOINT} times out after 30 seconds with a 504 on big ledgers",
                "endpoint": ENDPOINT, "method": "GET", "outcome": "degraded"}}


def make_plan(key: str) -> Plan:
    today = datetime.now(UTC).date()
    plan = Plan(key, today - timedelta(days=today.weekday() + 7))
    c = plan.canary

    # The file drop: one account's three reports, a single record, a report naming the account.
    f = "--account A"
    a = plan.account("drop", f, mentioned=True)
    shared = c("drop+collector", "message (a word several reports share)", f + ", --account C")
    plan.drop += [
        _afp(plan, "drop", f, a, plan.at(-1, 2, 9), extra={"session_id": f"sess_{c('drop', 'session_id', f)}",
                                                             "suggestion": f"Stream the {shared} export in pages"}),
        _afs(plan, "drop", f, a, plan.at(-1, 3, 10), "ticket"),
        _afp(plan, "drop", f, a, plan.at(0, 1, 11), extra={
            "expected": f"The {c('drop', 'expected', f)} export to finish within a minute",
            "evidence": {"status_code": 504, "response_excerpt": f"upstream {c('drop', 'evidence.response_excerpt', f)} "
                                                                 f"timed out ({shared})"}}),
    ]
    f = "--record B"
    single = _afp(plan, "drop", f, "acct-erasure-plain-1", plan.at(-1, 4, 12),
                  extra={"suggestion": f"Offer an async {c('drop', 'suggestion', f)} export"})
    plan.drop.append(single)
    plan.drop.append(_afs(plan, "drop", "--account A (named in it)", "shared-desk", plan.at(0, 2, 13), "reporter", a))
    # No report of the problem without a canary: its medoid, quoted by the digest, carries some.
    plan.drop_late.append(_keeper(9, plan.at(0, 4, 8)))
    plan.forgets += [["--account", a], ["--record", single["id"]]]

    # The collector: a service's records (one account's two, a single one), an agent's submission.
    f = "--account C"
    ca = plan.account("collector", f)
    plan.collector_records += [
        _afp(plan, "collector", f, ca, plan.at(0, 2, 9), extra={
            "request_id": f"req_{c('collector', 'request_id', f)}", "suggestion": f"Page the {shared} export"}),
        _afs(plan, "collector", f, ca, plan.at(0, 3, 9), "order_ref"),
    ]
    f = "--collector collector --record D"
    csingle = _afp(plan, "collector", f, "acct-erasure-plain-2", plan.at(0, 3, 14), extra={
        "evidence": {"status_code": 504, "response_excerpt": f"gateway {c('collector', 'evidence.response_excerpt', f)} "
                                                             "timed out"}})
    plan.collector_records.append(csingle)
    f = "--account E (an agent key's account)"
    agent = plan.account("collector (POST /feedback)", f)
    plan.agent_accounts[AGENT_KEY] = agent
    sub = _afp(plan, "collector (POST /feedback)", f, "-", plan.at(0, 0, 0), rid="-",
               extra={"session_id": f"sess_{c('collector (POST /feedback)', 'session_id', f)}"})
    plan.agent_submissions.append(sub["feedback"])  # the receiver sets id, time, service, account
    f = "--account G (after filing)"
    growth = plan.account("collector (growth)", f)
    plan.collector_growth.append(_afp(plan, "collector (growth)", f, growth, plan.at(0, 4, 16), outcome="blocked"))
    plan.forgets += [["--account", ca], ["--collector", "collector", "--record", csingle["id"]], ["--account", agent],
                     ["--account", growth]]

    # The in-session table: one owner's two rows, a single row.
    f = "--account S"
    user = plan.account("console", f)
    for n in range(2):
        rid = f"row-{c('console', 'id', f)}"
        plan.rows.append(_row(plan, rid, user, plan.at(0, 1 + n, 15), f, pointers=n == 0))
        plan.forgotten_rows.append(rid)
    f = "--collector console --record T"
    rid = f"row-{c('console', 'id', f)}"
    plan.rows.append(_row(plan, rid, "usr-erasure-plain", plan.at(0, 2, 17), f, pointers=False))
    plan.forgotten_rows.append(rid)
    plan.rows.append({**_row(plan, "row-keeper", "usr-keeper", plan.at(0, 3, 17), "", pointers=False, plain=True)})
    plan.forgets += [["--account", user], ["--collector", "console", "--record", rid]]
    return plan


def _row(plan: Plan, rid: str, user: str, when: datetime, forget: str, pointers: bool,
         plain: bool = False) -> dict[str, Any]:
    c = (lambda field: "main") if plain else (lambda field: plan.canary("console", field, forget))
    row: dict[str, Any] = {
        "id": rid, "ts": int(when.timestamp() * 1000), "user_id": user, "instance_id": "inst-erasure",
        "author": "user", "surface": "chat", "sentiment": "bad",
        "body": f"The {c('body')} ledger export still times out after 30 seconds",
        "trace_id": None, "message_id": None, "session_id": None, "target_role": "assistant",
        "target_text": f"I exported the {c('target_text')} ledger for you.",
        "prompt_text": f"export the {c('prompt_text')} ledger please",
        "context": orjson.dumps({"agentSlug": "ledger-bot", "dictation": f"export the {c('context.dictation')} ledger"}
                                ).decode(),
        "status": "open", "issue_url": None, "updated_at": when.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if pointers:
        row |= {"trace_id": f"trace-{c('trace_id')}", "message_id": f"msg-{c('message_id')}",
                "session_id": f"sess-{c('session_id')}"}
    return row


# --------------------------------------------------------------------------------------------
# The pipeline, as a user runs it
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(folder: Path, plan: Plan, collector_port: int, github_url: str) -> Path:
    sample = folder / "sample"
    api_keys = ", ".join(f'"{hash_key(k)}" = "{a}"' for k, a in plan.agent_accounts.items())
    config = folder / "feedback-insights.toml"
    config.write_text(f"""\
[warehouse]
path = "feedback.duckdb"

[privacy]
hmac_key = "{plan.key}"

[[sources]]
name = "sample"
kind = "files"
path = "{sample}"
patterns = ["afp_records.jsonl", "afs.jsonl", "sep2369.jsonl", "rfc026.json"]

[[sources]]
name = "sample-submissions"
kind = "files"
path = "{sample / 'afp_submissions.jsonl'}"
dialect = "afp"
service = "orbit-mcp"
service_by_tool = {{ "/*" = "acme-companies-api" }}
received_at = "2026-11-29T23:59:59Z"

[[sources]]
name = "sample-session"
kind = "sql"
path = "{sample / 'session.sqlite'}"
service = "pags-console"

[[sources]]
name = "drop"
kind = "files"
path = "drop"
service = "{SERVICE}"

[[sources]]
name = "console"
kind = "sql"
path = "console.sqlite"
service = "{CONSOLE_SERVICE}"

[[sources]]
name = "collector"
kind = "http"
url = "http://127.0.0.1:{collector_port}"
key_env = "{COLLECTOR_KEY_ENV}"
retries = 1

[collector]
db = "collector.sqlite"
service = "{SERVICE}"
auth = "optional"
api_keys = {{ {api_keys} }}
ingest_keys = ["{hash_key(INGEST_KEY)}"]
pipeline_keys = ["{hash_key(PIPELINE_KEY)}"]
rate_limit_per_account = 0
rate_limit_per_ip = 0

[digest]
folder = "digests"

[github]
base_url = "{github_url}"
token_env = "{GITHUB_TOKEN_ENV}"
default_repo = "{REPO}"
seconds_between_writes = 0
timeout = 10
retries = 2
backoff = 0.1
""")
    return config


def write_drop(folder: Path, records: list[dict[str, Any]]) -> None:
    folder.mkdir(exist_ok=True)
    with (folder / "reports.jsonl").open("ab") as handle:
        for record in records:
            handle.write(orjson.dumps(record) + b"\n")


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE IF NOT EXISTS agent_feedback ({', '.join(SESSION_COLUMNS)})")
    con.executemany(f"INSERT INTO agent_feedback VALUES ({', '.join('?' * len(SESSION_COLUMNS))})",
                    [[row[c] for c in SESSION_COLUMNS] for row in rows])
    con.commit()
    con.close()


@dataclass
class Pipeline:
    folder: Path
    config: Path
    env: dict[str, str]
    console: Console
    collector_url: str = ""
    collector: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str, config: bool = True) -> tuple[float, str]:
        """One command in its own process; returns its wall time and its output."""
        command = [sys.executable, "-m", "feedback_insights", *args, *(["--config", str(self.config)] if config else [])]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=900)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return seconds, done.stdout + done.stderr

    def start_collector(self, port: int) -> None:
        log = (self.folder / "collector.log").open("ab")
        self.collector = subprocess.Popen(
            [sys.executable, "-m", "feedback_insights", "collector", "serve", "--host", "127.0.0.1", "--port", str(port),
             "--config", str(self.config)], cwd=self.folder, env=self.env, stdout=log, stderr=log)
        self.collector_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.collector.poll() is not None:
                raise RuntimeError(f"the collector exited: {(self.folder / 'collector.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.collector_url}/.well-known/agent-feedback", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the collector did not start")

    def stop_collector(self) -> None:
        if self.collector is not None and self.collector.poll() is None:
            self.collector.send_signal(signal.SIGINT)
            try:
                self.collector.wait(20)
            except subprocess.TimeoutExpired:
                self.collector.kill()
                self.collector.wait()

    def post_records(self, records: list[dict[str, Any]], erased: bool = False) -> None:
        """Forward ``records`` with the ingest key; every one must be taken, or (``erased``:
        a re-send, forgotten reports among them) none stored anew."""
        answer = httpx.post(f"{self.collector_url}/v1/records", json={"records": records},
                            headers={"Authorization": f"Bearer {INGEST_KEY}"}, timeout=30)
        answer.raise_for_status()
        if erased:
            taken = [r for r in answer.json()["results"] if r["status"] == "accepted"]
            if taken:
                raise RuntimeError(f"the collector took forgotten reports again: {taken}")
            return
        refused = [r for r in answer.json()["results"] if r["status"] == "rejected"]
        if refused:
            raise RuntimeError(f"the collector rejected {refused}")

    def post_submission(self, key: str, submission: dict[str, Any]) -> None:
        answer = httpx.post(f"{self.collector_url}/feedback", json=submission,
                            headers={"Authorization": f"Bearer {key}"}, timeout=30)
        if answer.status_code != 202:
            raise RuntimeError(f"POST /feedback: {answer.status_code} {answer.text}")


def approve_pending(config_path: Path) -> int:
    from feedback_insights.config import load
    from feedback_insights.drafts import approve
    from feedback_insights.warehouse import Warehouse

    cfg = load(config_path)
    with Warehouse(cfg.warehouse.path) as wh:
        pending = [i for (i,) in wh.con.execute("SELECT id FROM drafts WHERE status = 'pending' ORDER BY id").fetchall()]
        for draft_id in pending:
            approve(wh, draft_id, "erasure-benchmark-xxxxxxxxxxxxxx")
    return len(pending)


# --------------------------------------------------------------------------------------------
# Looking for the canaries
# --------------------------------------------------------------------------------------------

#: Column types that cannot hold text (numbers, times, vectors of numbers).
_NO_TEXT = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL", "BOOLEAN", "DATE", "TIME", "TIMESTAMP", "INTERVAL", "UUID")


def _texty(data_type: str) -> bool:
    return not data_type.upper().startswith(_NO_TEXT)


#: Per place: needle → where (table.column or file) → hits (rows, or occurrences in bytes).
Found = dict[str, dict[str, Counter[str]]]


def _duck_columns(con: duckdb.DuckDBPyConnection, relation: str, columns: list[tuple[str, str]], needles: list[str],
                  where: str, into: dict[str, Counter[str]]) -> None:
    for column, data_type in columns:
        if not _texty(data_type):
            continue
        quoted = '"' + column.replace('"', '""') + '"'
        rows = con.execute(
            f"SELECT n, count(*) FROM (SELECT unnest(list_filter($needles, lambda n: contains(lower(CAST({quoted} AS VARCHAR)), n)))"
            f" AS n FROM {relation} WHERE {quoted} IS NOT NULL) GROUP BY n", {"needles": needles}).fetchall()
        for needle, hits in rows:
            into[needle][f"{where}.{column}"] += hits


def search_warehouse(path: Path, needles: list[str], into: dict[str, Counter[str]]) -> None:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_catalog = current_database() ORDER BY 1, 2").fetchall()
        for schema, table in tables:
            columns = con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = ? AND table_name = ? "
                "AND table_catalog = current_database() ORDER BY ordinal_position", [schema, table]).fetchall()
            _duck_columns(con, f'"{schema}"."{table}"', columns, needles, table, into)
    finally:
        con.close()


def search_parquet(folder: Path, needles: list[str], into: dict[str, Counter[str]]) -> None:
    con = duckdb.connect()
    try:
        for path in sorted(folder.rglob("*.parquet")):
            relation = f"read_parquet('{str(path).replace(chr(39), chr(39) * 2)}')"
            described = con.sql(f"SELECT * FROM {relation}")
            columns = [(name, str(kind)) for name, kind in zip(described.columns, described.types, strict=True)]
            _duck_columns(con, relation, columns, needles, path.stem, into)
    finally:
        con.close()


def search_sqlite(path: Path, needles: list[str], into: dict[str, Counter[str]]) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
        for table in tables:
            cursor = con.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            for row in cursor:
                for name, value in zip(names, row, strict=True):
                    if value is None:
                        continue
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    text = text.lower()
                    for needle in needles:
                        if needle in text:
                            into[needle][f"{table}.{name}"] += 1
    finally:
        con.close()


def search_bytes(paths: list[Path], needles: list[str], into: dict[str, Counter[str]], base: Path) -> None:
    for path in paths:
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes().lower()
        for needle in needles:
            if hits := data.count(needle.encode()):
                into[needle][str(path.relative_to(base))] += hits


def search_github(fake: GitHubFake, needles: list[str], into: dict[str, Counter[str]]) -> None:
    for repo in list(fake._repos):
        for issue in fake.issues(repo):
            texts = {"title": issue.get("title") or "", "body": issue.get("body") or ""}
            for n, comment in enumerate(fake.comments(repo, issue["number"])):
                texts[f"comment {n + 1}"] = comment.get("body") or ""
            for part, text in texts.items():
                lowered = text.lower()
                for needle in needles:
                    if hits := lowered.count(needle):
                        into[needle][f"{repo}#{issue['number']} {part}"] += hits


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


#: What the search walks past in the catch-all: the sources themselves and what other places cover.
_NOT_OTHER = ("canaries.json", "sample", "drop", "console.sqlite", "feedback-insights.toml", "feedback.duckdb", "collector.sqlite",
              "collector.log", "export-", "digests", "prefect-home", "rewrite-bench")


def search_everywhere(folder: Path, fake: GitHubFake, needles: list[str], export: Path | None) -> Found:
    found: Found = {place: defaultdict(Counter) for place in [*PLACES, USERS_COPY]}
    search_warehouse(folder / "feedback.duckdb", needles, found["tables"])
    search_bytes([p for p in folder.iterdir() if p.name.startswith("feedback.duckdb")], needles, found["wh-bytes"], folder)
    search_sqlite(folder / "collector.sqlite", needles, found["coll-rows"])
    search_bytes([p for p in folder.iterdir() if p.name.startswith("collector.sqlite")], needles, found["coll-bytes"],
                 folder)
    search_bytes([folder / "collector.log"], needles, found["coll-log"], folder)
    search_github(fake, needles, found["github"])
    for place, where in (("export", export), (USERS_COPY, folder / "export-before")):
        if where is not None and where.exists():
            search_parquet(where, needles, found[place])
            search_bytes(_files(where), needles, found[place], folder)
    if export is None:
        found.pop("export")
    search_bytes(_files(folder / "digests"), needles, found["digests"], folder)
    search_bytes(_files(folder / "prefect-home"), needles, found["prefect"], folder)
    others = [p for p in _files(folder) if not p.relative_to(folder).parts[0].startswith(_NOT_OTHER)]
    search_bytes(others, needles, found["other"], folder)
    return found


def hits(found: Found, place: str) -> tuple[int, int]:
    """(canaries found, hits) in a place."""
    where = found.get(place, {})
    return len([n for n, c in where.items() if c]), sum(sum(c.values()) for c in where.values())


# --------------------------------------------------------------------------------------------
# What erasure costs
# --------------------------------------------------------------------------------------------


def rewrite_seconds(path: Path, times: int = 3) -> list[float]:
    from feedback_insights.warehouse import Warehouse

    seconds = []
    with Warehouse(path) as wh:
        for _ in range(times):
            start = time.perf_counter()
            wh.rewrite()
            seconds.append(time.perf_counter() - start)
    return seconds


def build_big(folder: Path, n: int) -> tuple[Path, Config]:
    """``n`` generated records ingested for real, each with an embedding row of 384 random floats."""
    import random

    from feedback_insights.ingest import ingest
    from feedback_insights.warehouse import Warehouse

    data = folder / f"records-{n}.jsonl"
    rng = random.Random(n)
    with data.open("wb") as handle:
        for i in range(n):
            handle.write(orjson.dumps(afp_record(rng, i)) + b"\n")
    path = folder / f"big-{n}.duckdb"
    config = Config(privacy=PrivacyConfig(hmac_key="erasure-benchmark-xxxxxxxxxxxxxx"), warehouse=WarehouseConfig(path=path),
                    ingest=IngestConfig(batch_size=10_000),
                    sources=[FileDropConfig(kind="files", name="bench", path=data, service="pags")])
    with Warehouse(path) as wh:
        ingest(config, wh)
        wh.con.execute("""INSERT INTO embeddings SELECT 'benchmark-random', sha256(collector || ':' || id),
                          list_transform(range(384), lambda x: random()::FLOAT) FROM records""")
        wh.checkpoint()
    return path, config


def forget_one_in_process(config: Config, path: Path) -> float:
    from feedback_insights.publish import forget, records_to_forget
    from feedback_insights.warehouse import Warehouse

    with Warehouse(path) as wh:
        [(record_id,)] = wh.con.execute("SELECT id FROM records ORDER BY id LIMIT 1 OFFSET 7").fetchall()
        start = time.perf_counter()
        forget(config, wh, records_to_forget(config, wh, record=record_id), "benchmark", "cost")
        return time.perf_counter() - start


def forget_phases(config_path: Path, copy: Path, account: str) -> list[tuple[str, float]]:
    """One ``forget --account`` in this process on a copy of the warehouse as it was before the
    forgets, each step timed (no GitHub, no collector: their calls are the CLI's to time)."""
    from feedback_insights.config import GitHubConfig, HttpCollectorConfig, load
    from feedback_insights.publish import _erasure, records_to_forget
    from feedback_insights.warehouse import Warehouse

    cfg = load(config_path)
    cfg = cfg.model_copy(update={"warehouse": WarehouseConfig(path=copy), "github": GitHubConfig(),
                                 "sources": [s for s in cfg.sources if not isinstance(s, HttpCollectorConfig)]})
    spent: dict[str, float] = defaultdict(float)

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - start
        return wrapper

    names = {"erase_records": "erase the rows (one transaction) + ledger", "describe_stale": "describe clusters again",
             "redraft_erased": "redraft drafts"}
    saved = {name: getattr(_erasure, name) for name in names}
    rewrite = Warehouse.rewrite
    try:
        for name, label in names.items():
            setattr(_erasure, name, timed(label, saved[name]))
        Warehouse.rewrite = timed("Warehouse.rewrite()", rewrite)  # type: ignore[method-assign]
        with Warehouse(copy) as wh:
            start = time.perf_counter()
            target = timed("records_to_forget", records_to_forget)(cfg, wh, account=account)
            _erasure.forget(cfg, wh, target, "benchmark", "phases")
            total = time.perf_counter() - start
    finally:
        for name, fn in saved.items():
            setattr(_erasure, name, fn)
        Warehouse.rewrite = rewrite  # type: ignore[method-assign]
    return [*spent.items(), ("forget in all (in process)", total)]


def mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:,.1f}"


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 50_000],
                        help="records in the bigger warehouses Warehouse.rewrite() is timed on")
    parser.add_argument("--no-redeliver", action="store_true",
                        help="skip the last step: a service sends the forgotten records to the collector again")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = parser.parse_args(argv)
    console = Console(width=150)
    folder = Path(tempfile.mkdtemp(prefix="erasure-"))
    plan = make_plan("erasure-benchmark-" + secrets.token_hex(8))
    try:
        with running_github(GITHUB_TOKEN) as fake:
            fake.add_repo(REPO)
            return run(args, console, folder, plan, fake)
    finally:
        if args.keep:
            console.print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def run(args: argparse.Namespace, console: Console, folder: Path, plan: Plan, fake: GitHubFake) -> int:
    (folder / "sample").mkdir()
    for name in SAMPLE_FILES:
        shutil.copy(ROOT / "data" / "sample" / name, folder / "sample" / name)
    write_drop(folder / "drop", plan.drop)
    write_rows(folder / "console.sqlite", plan.rows)
    port = free_port()
    config = write_config(folder, plan, port, fake.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEEDBACK_INSIGHTS_", "PREFECT_"))}
    env |= {"PREFECT_HOME": str(folder / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            COLLECTOR_KEY_ENV: PIPELINE_KEY, GITHUB_TOKEN_ENV: GITHUB_TOKEN, "COLUMNS": "200"}
    pipe = Pipeline(folder, config, env, console)
    needles = [k.needle for k in plan.canaries]
    (folder / "canaries.json").write_bytes(orjson.dumps([k.__dict__ for k in plan.canaries], option=orjson.OPT_INDENT_2))
    ingest_lines: list[str] = []

    def step(what: str, *cli: str) -> str:
        seconds, output = pipe.cli(*cli)
        console.print(f"[dim]{what}: {seconds:.1f} s[/]")
        return output

    try:
        pipe.start_collector(port)
        pipe.post_records(plan.collector_records)
        for key in plan.agent_accounts:
            for submission in plan.agent_submissions:
                pipe.post_submission(key, submission)
        step("run", "run")
        approved = approve_pending(config)
        console.print(f"[dim]approved {approved} drafts[/]")
        step("publish", "publish")
        pipe.post_records(plan.collector_growth)
        step("run (after a blocking report arrived)", "run")
        previous = (plan.digest_week - timedelta(weeks=1)).isocalendar()
        step("digest of the week before", "digest", "--week", f"{previous.year}-W{previous.week:02d}", "--no-send")
        step("warehouse export", "warehouse", "export", str(folder / "export-before"))
        before = search_everywhere(folder, fake, needles, folder / "export-before")

        costs: list[tuple[str, float, str]] = []
        (folder / "rewrite-bench").mkdir()
        shutil.copy(folder / "feedback.duckdb", folder / "rewrite-bench" / "before-forget.duckdb")
        baseline, _ = pipe.cli("quarantine", "list")
        for target in plan.forgets:
            seconds, output = pipe.cli("forget", *target, "--reason", "erasure benchmark", "--by", "dpo")
            costs.append((" ".join(target), seconds, output.strip().splitlines()[0]))
        middle = search_everywhere(folder, fake, needles, None)

        write_drop(folder / "drop", plan.drop_late)  # grown: read again from its first line
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        con = sqlite3.connect(folder / "console.sqlite")
        con.executemany("UPDATE agent_feedback SET status = 'triaged', updated_at = ? WHERE id = ?",
                        [(now, rid) for rid in plan.forgotten_rows])
        con.commit()
        con.close()
        reingest = step("ingest (the same sources again)", "ingest")
        step("run", "run")
        step("warehouse export (fresh)", "warehouse", "export", str(folder / "export-after"))
        after = search_everywhere(folder, fake, needles, folder / "export-after")
        redelivered: Found = {}
        if not args.no_redeliver:
            # A service forwards the forgotten records to the collector once more: its ledger
            # refuses them, and the pipeline's would.
            pipe.post_records([*plan.collector_records, *plan.collector_growth], erased=True)
            redeliver_line = step("ingest (after a service re-sent the collector's records)", "ingest")
            ingest_lines.append(redeliver_line)
            redelivered = {REDELIVERED_TABLES: defaultdict(Counter), REDELIVERED: defaultdict(Counter)}
            search_warehouse(folder / "feedback.duckdb", needles, redelivered[REDELIVERED_TABLES])
            search_sqlite(folder / "collector.sqlite", needles, redelivered[REDELIVERED])
    finally:
        pipe.stop_collector()

    after |= redelivered
    ok = report_places(console, plan, before, middle, after)
    ok &= report_canaries(console, plan, before, after)
    for line in [reingest, *ingest_lines]:
        said = next((x for x in line.splitlines() if x.startswith("ingest")), "")
        console.print(f"re-ingest said: {said.strip()}")
    report_costs(console, folder, config, costs, baseline, args.sizes)
    console.print("[green]PASS[/]: every canary was found before and none after" if ok else
                  "[red]FAIL[/]: see the tables above")
    return 0 if ok else 1


def report_places(console: Console, plan: Plan, before: Found, middle: Found, after: Found) -> bool:
    expected = [k for k in plan.canaries if k.expected]
    table = Table(title=f"Erasure: {len(plan.canaries)} canaries ({len(expected)} stored by the pipeline, "
                        f"{len(plan.canaries) - len(expected)} raw accounts expected nowhere) — canaries found · hits")
    for column in ("place", "before forget", "after forget", "after re-ingest + run"):
        table.add_column(column, justify="left" if column == "place" else "right")
    ok = True
    rows = [*PLACES.items(), (USERS_COPY, USERS_COPY_LABEL)]
    if REDELIVERED in after:
        rows += [(REDELIVERED_TABLES, "warehouse tables after a service re-sent the forgotten records to the "
                                      "collector and ingest ran"),
                 (REDELIVERED, "collector rows after that re-send (its ledger refused them)")]
    for place, label in rows:
        cells = []
        for found in (before, middle, after):
            if place not in found:
                cells.append("—")
                continue
            n, h = hits(found, place)
            cells.append(f"{n} · {h}")
        n_after, _ = hits(after, place)
        if n_after and place != USERS_COPY:
            ok = False
            cells[-1] = f"[red]{cells[-1]}[/]"
        table.add_row(label, *cells)
    console.print(table)
    return ok


def report_canaries(console: Console, plan: Plan, before: Found, after: Found) -> bool:
    table = Table(title="Each canary: where it was before the forget, and where it is after")
    for column in ("canary", "source", "field", "forgotten by", "found before in", "after (counted places)"):
        table.add_column(column, overflow="fold")
    ok = True
    short = {"tables": "T", "wh-bytes": "Wb", "coll-rows": "C", "coll-bytes": "Cb", "coll-log": "Cl", "github": "G",
             "export": "E", "digests": "D", "prefect": "P", "other": "O", USERS_COPY: "E0"}
    for k in plan.canaries:
        places = [short[p] for p in short if before.get(p, {}).get(k.needle)]
        survived = {p: where[k.needle] for p, where in after.items()
                    if p not in (USERS_COPY, REDELIVERED) and where.get(k.needle)}
        if k.expected and not before["tables"].get(k.needle):
            verdict = "[red]control failed: in no table[/]"
            ok = False
        elif not k.expected and places:
            verdict = f"[red]a raw account stored: {', '.join(places)}[/]"
            ok = False
        else:
            verdict = " ".join(places) or "— (pseudonymised)"
        left = "; ".join(f"{p}: " + ", ".join(f"{w} ×{n}" for w, n in where.items()) for p, where in survived.items())
        if left:
            ok = False
        table.add_row(k.needle, k.source, k.field, k.forget, verdict, f"[red]{left}[/]" if left else "0")
    console.print(table)
    console.print("T tables · Wb warehouse bytes · C collector rows · Cb collector bytes · Cl collector log · "
                  "G GitHub · E export · D digests · P Prefect home · O other files · E0 the export made before")
    return ok


def report_costs(console: Console, folder: Path, config: Path, costs: list[tuple[str, float, str]], baseline: float,
                 sizes: list[int]) -> None:
    table = Table(title="What erasure cost: each `forget` as run (wall time of the command, GitHub and collector "
                        "calls and the file rewrite included)")
    for column in ("forget", "seconds", "it said"):
        table.add_column(column, justify="right" if column == "seconds" else "left", overflow="fold")
    for target, seconds, line in costs:
        table.add_row(target, f"{seconds:.2f}", line)
    table.add_row("(a no-op command: `quarantine list`)", f"{baseline:.2f}", "Python and the CLI starting")
    console.print(table)
    bench = folder / "rewrite-bench"
    account = costs[0][0].split(" ", 1)[1]
    phases = Table(title="One `forget --account` (the first above) in process, on a copy of the warehouse before "
                         "the forgets, step by step")
    phases.add_column("step")
    phases.add_column("seconds", justify="right")
    for name, seconds in forget_phases(config, bench / "before-forget.duckdb", account):
        phases.add_row(name, f"{seconds:.2f}")
    console.print(phases)

    sample = bench / "sample.duckdb"
    shutil.copy(folder / "feedback.duckdb", sample)
    from feedback_insights.warehouse import Warehouse

    with Warehouse(sample) as wh:
        [(records,)] = wh.con.execute("SELECT count(*) FROM records").fetchall()
    rows = [("this run's warehouse (sample + canaries)", records, sample, rewrite_seconds(sample), None)]
    for n in sizes:
        path, big_config = build_big(bench, n)
        seconds = rewrite_seconds(path)
        rows.append((f"{n:,} generated records + embeddings", n, path, seconds, forget_one_in_process(big_config, path)))
    cost = Table(title="Warehouse.rewrite() alone (median of 3), and an in-process forget of one record")
    for column in ("warehouse", "records", "file MB", "rewrite s (median)", "runs", "forget one record s"):
        cost.add_column(column, justify="left" if column == "warehouse" else "right")
    for label, count, path, seconds, one in rows:
        cost.add_row(label, f"{count:,}", mb(path), f"{statistics.median(seconds):.2f}",
                     " · ".join(f"{s:.2f}" for s in seconds), "—" if one is None else f"{one:.2f}")
    console.print(cost)


if __name__ == "__main__":
    sys.exit(main())
