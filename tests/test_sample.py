"""The embedded sample: realistic, deterministic, and ingested exactly as its ground truth says."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from feedback_insights.config import SAMPLE_HMAC_KEY, embedded_default
from feedback_insights.ingest import ingest
from feedback_insights.privacy import Pseudonymiser
from feedback_insights.warehouse import Warehouse

from .conftest import SAMPLE

TRUTH = [json.loads(line) for line in (SAMPLE / "truth.jsonl").read_text().splitlines()]
VALID = [t for t in TRUTH if not t["invalid"]]
INVALID = [t for t in TRUTH if t["invalid"]]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    config = embedded_default(tmp_path_factory.mktemp("sample") / "feedback.duckdb")
    wh = Warehouse(config.warehouse.path)
    summary = ingest(config, wh)
    assert summary.errors == []
    return wh


def test_the_sample_is_big_and_varied_enough() -> None:
    assert len(VALID) >= 400
    assert len({t["service"] for t in VALID}) == 3
    assert len({t["account"] for t in VALID if t["account"]}) == 40
    accounts_per_problem: dict[str, set[str]] = defaultdict(set)
    for t in VALID:
        if t["problem"] and t["polarity"] == "problem" and t["account"]:
            accounts_per_problem[t["problem"]].add(t["account"])
    assert len(accounts_per_problem) >= 15
    assert all(len(a) >= 3 for a in accounts_per_problem.values())
    assert sum(t["polarity"] == "praise" for t in VALID) >= 30
    assert len(INVALID) >= 20
    planted = json.loads((SAMPLE / "planted.json").read_text())
    assert len(planted["secrets"]) >= 10 and len(planted["pii"]) >= 10 and len(planted["injections"]) >= 5


def test_every_valid_unit_is_stored_and_every_invalid_one_quarantined(warehouse: Warehouse) -> None:
    assert warehouse.con.execute("SELECT count(*) FROM records").fetchone() == (len(VALID),)
    assert warehouse.con.execute("SELECT count(*) FROM quarantine").fetchone() == (len(INVALID),)
    dialects = dict(warehouse.con.execute("SELECT dialect, count(*) FROM records GROUP BY ALL").fetchall())
    assert dialects == {"afp": 146, "afs": 96, "sep2369": 58, "session": 81, "rfc026": 58}


def test_native_ids_keep_their_service_and_account(warehouse: Warehouse) -> None:
    stored = {
        row[0]: row[1:]
        for row in warehouse.con.execute("SELECT id, service, account FROM records").fetchall()
    }
    pseudonym = Pseudonymiser(SAMPLE_HMAC_KEY)
    native = [t for t in VALID if t["record_id"] and t["file"] != "rfc026.json"]
    assert len(native) > 250
    for t in native:
        assert stored[t["record_id"]] == (t["service"], t["account"] and pseudonym(t["account"])), t


def test_invalid_lines_are_quarantined_where_the_truth_says(warehouse: Warehouse) -> None:
    positions = {
        (Path(uri).name.split("#")[0], position)
        for uri, position in warehouse.con.execute("SELECT source_uri, position FROM quarantine").fetchall()
    }
    rowids = dict(sqlite3.connect(SAMPLE / "session.sqlite").execute("SELECT rowid, id FROM agent_feedback").fetchall())
    for t in INVALID:
        if t["file"] == "session.sqlite":
            expected = ("session.sqlite", f"agent_feedback.id={rowids[t['line']]}")
        elif t["file"] == "rfc026.json":
            expected = ("rfc026.json", f"index {t['line'] - 1}")
        else:
            expected = (t["file"], f"line {t['line']}")
        assert expected in positions, t


def test_the_retries_in_the_sample_point_at_their_first_report(warehouse: Warehouse) -> None:
    retried = warehouse.con.execute(
        "SELECT r.id, r.duplicate_of, f.session_id = r.session_id FROM records r JOIN records f ON f.id = r.duplicate_of"
    ).fetchall()
    assert len(retried) >= 4
    assert all(same_session for _, _, same_session in retried)


def test_the_generator_is_deterministic(tmp_path: Path) -> None:
    shutil.copy(SAMPLE / "generate.py", tmp_path / "generate.py")
    subprocess.run([sys.executable, str(tmp_path / "generate.py")], check=True, capture_output=True, cwd=tmp_path)
    for name in ("afp_records.jsonl", "afp_submissions.jsonl", "afs.jsonl", "sep2369.jsonl", "rfc026.json",
                 "session.sqlite", "truth.jsonl", "planted.json"):
        fresh = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
        committed = hashlib.sha256((SAMPLE / name).read_bytes()).hexdigest()
        assert fresh == committed, name
