"""The command line, run as a user runs it (a child process)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import duckdb

from feedback_insights.config import SAMPLE_HMAC_KEY
from feedback_insights.warehouse import Warehouse

from .conftest import render_help, run_cli, write_jsonl
from .test_dialects import AFS_SNAKE, RFC026


def test_help_is_instant_and_lists_the_commands() -> None:
    result = run_cli("--help", env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")})  # a pipe's width
    assert result.returncode == 0
    for command in ("validate", "normalise", "ingest", "run", "quarantine"):
        assert command in result.stdout
    # test_cli_quiet renders every other page in its own process: the same text a child prints.
    usage, page = result.stdout.split("\n", 1)
    assert usage.startswith("Usage: ") and page == render_help().stdout.split("\n", 1)[1]


def test_validate_reports_every_kind_of_bad_input(tmp_path: Path) -> None:
    data = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps({"type": "bug", "goal": "g", "message": "m"}),
        "this is not json",
        json.dumps("a string"),
        json.dumps({"type": "bug", "goal": 7, "message": "m"}),
        json.dumps({"type": "bug", "goal": "g", "message": "x" * 17_000}),
        "",
        json.dumps(AFS_SNAKE),
        json.dumps(RFC026),
    ]
    data.write_text("\n".join(lines) + "\n")
    result = run_cli("validate", str(data))
    assert result.returncode == 1
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["index"] for o in out] == list(range(7))  # the blank line is not a record
    assert [o["valid"] for o in out] == [True, False, False, False, False, True, True]
    assert [o["dialect"] for o in out] == ["afp", None, None, "afp", "afp", "afs", "rfc026"]
    assert "not valid JSON" in out[1]["errors"][0]["message"]
    assert out[2]["errors"] == [{"path": "", "message": "must be an object"}]
    assert out[3]["errors"] == [{"path": "goal", "message": "must be a string"}]
    assert {e["path"] for e in out[4]["errors"]} == {"", "message"}
    assert any("16384" in e["message"] for e in out[4]["errors"])


def test_validate_exit_code_is_zero_when_all_valid_and_max_bytes_is_configurable(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ok.jsonl", [{"type": "bug", "goal": "g", "message": "m", "metadata": {"x": "y" * 20_000}}])
    assert run_cli("validate", str(data)).returncode == 1
    assert run_cli("validate", "--max-bytes", "65536", str(data)).returncode == 0


def test_validate_rejects_an_unknown_dialect_and_a_missing_file_in_one_line(tmp_path: Path) -> None:
    result = run_cli("validate", "--dialect", "xml", str(tmp_path / "none.jsonl"))
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --dialect must be one of: auto, afp, afs, session, rfc026 (got 'xml')"
    result = run_cli("validate", str(tmp_path / "none.jsonl"))
    assert result.returncode == 2 and "no such file" in result.stderr and "Traceback" not in result.stderr


def test_normalise_writes_canonical_jsonl_and_reports_invalid_lines(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [AFS_SNAKE, RFC026, {"type": "nope", "goal": "g", "message": "m"}])
    out = tmp_path / "out.jsonl"
    result = run_cli("normalise", "--input", str(data), "--output", str(out), "--service", "orbit-mcp")
    assert result.returncode == 1
    assert "line 3: type: must be one of" in result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["dialect"] for r in records] == ["afs", "rfc026"]
    assert records[0]["service"] == "orbit-mcp" and records[0]["collector"] == "cli"
    assert records[1]["original"] == RFC026


def test_run_on_a_config_and_quarantine_replay_after_a_fix(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "a.jsonl", [{"type": "bug", "goal": "g", "message": "m"},
                                   {"type": "bug", "goal": "g", "message": "big", "metadata": {"x": "y" * 20_000}}])
    config = tmp_path / "feedback-insights.toml"
    config.write_text(f'[warehouse]\npath = "wh.duckdb"\n\n[[sources]]\nname = "drop"\nkind = "files"\npath = "{drop}"\nservice = "acme-api"\n')
    # Outside the embedded default, accounts need a real pseudonymisation key.
    result = run_cli("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: privacy.hmac_key: no key to pseudonymise accounts with")

    # A fresh shell's environment (no Prefect settings of this session's); --verbose shows
    # Prefect's INFO logs, which a quiet run hides (test_cli_quiet).
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
           "FEEDBACK_INSIGHTS_HMAC_KEY": "a-long-random-test-key-of-40-characters"}
    result = run_cli("--verbose", "run", "--config", str(config), env=env)
    assert result.returncode == 0, result.stderr
    assert "new 1" in result.stdout and "quarantined 1" in result.stdout
    assert re.search(r"\| INFO +\| Flow run '[^']+' - Finished in state Completed\(\)", result.stderr), result.stderr

    listed = run_cli("quarantine", "list", "--json", "--config", str(config))
    (entry,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert entry["problems"][0]["message"].endswith("the limit is 16384 bytes")

    # Still invalid under the same limit...
    assert "still invalid 1" in run_cli("quarantine", "replay", "--config", str(config), env=env).stdout
    # ...and stored once the operator raises it.
    config.write_text(config.read_text().replace('path = "wh.duckdb"\n', 'path = "wh.duckdb"\n\n[ingest]\nmax_bytes = 65536\n'))
    replayed = run_cli("quarantine", "replay", entry["id"], "--config", str(config), env=env)
    assert "replayed 1" in replayed.stdout and "records stored 1" in replayed.stdout
    with duckdb.connect(str(tmp_path / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM records").fetchone() == (2,)
        assert con.execute("SELECT status FROM quarantine").fetchall() == [("replayed",)]
    assert "0 quarantined" in run_cli("quarantine", "list", "--config", str(config)).stdout


def test_a_config_error_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[[sources]]\nname = "x"\nkind = "files"\n\n[ingest]\nbatch_size = 0\n')
    result = run_cli("ingest", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {config}: ")
    # Every problem, each on its line: not the first one and "(and 1 more)".
    assert result.stderr.splitlines() == [
        f"error: {config}: 2 problems:",
        "  ingest.batch_size: input should be greater than or equal to 1",
        "  sources.0.path: field required",
    ]


def test_field_names_that_look_like_markup_are_printed_as_text(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"type": "bug", "goal": "g", "message": "m", "[/oops]": 1}])
    result = run_cli("normalise", "--input", str(data), "--output", str(tmp_path / "out.jsonl"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "[/oops]: is not a recognised field" in result.stderr


def test_the_warehouse_round_trips_through_parquet(tmp_path: Path) -> None:
    assert run_cli("ingest", cwd=tmp_path).returncode == 0
    exported = run_cli("warehouse", "export", "parquet", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert {"records.parquet", "quarantine.parquet", "clusters.parquet", "drafts.parquet", "schema.sql"} <= {
        p.name for p in (tmp_path / "parquet").iterdir()
    }
    again = run_cli("warehouse", "export", "parquet", cwd=tmp_path)
    assert again.returncode == 2 and "is not empty" in again.stderr
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "feedback-insights.toml").write_text(f'[warehouse]\npath = "w.duckdb"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
    imported = run_cli("warehouse", "import", str(tmp_path / "parquet"), cwd=tmp_path / "copy")
    assert imported.returncode == 0, imported.stderr
    with Warehouse(tmp_path / "feedback.duckdb") as a, Warehouse(tmp_path / "copy" / "w.duckdb") as b:
        for table in ("records", "quarantine", "source_cursors"):
            query = f"SELECT * FROM {table} ORDER BY ALL"
            assert a.con.sql(query).fetchall() == b.con.sql(query).fetchall()
        assert b.con.execute("SELECT nextval('ingest_run_ids')").fetchall() == a.con.execute("SELECT nextval('ingest_run_ids')").fetchall()
