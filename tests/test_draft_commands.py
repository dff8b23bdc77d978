"""The drafting, review and publishing commands, run as a user runs them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson
import pytest

from feedback_insights.clusters import demand
from feedback_insights.config import SAMPLE_HMAC_KEY, embedded_default
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, run_cli, sample_copy, write_jsonl
from .github_fake import running_github

EDITOR = """
import pathlib, sys
path = pathlib.Path(sys.argv[1])
text = path.read_text()
text = text.replace("workaround: \\n", "workaround: Retry with page_size=50\\n", 1)
path.write_text(text.replace("labels: agent-feedback", "labels: agent-feedback, pagination", 1))
"""


@pytest.fixture
def workspace(clustered_sample: Path, tmp_path: Path) -> Path:
    """A folder with a drafted copy of the sample and a configuration that points at it."""
    drafted_copy(clustered_sample, tmp_path)
    (tmp_path / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n'
        '[github]\nbase_url = "http://127.0.0.1:9"\ntoken_env = "FI_CLI_GITHUB_TOKEN"\ndefault_repo = "acme/api"\n'
        "timeout = 2\nretries = 1\nbackoff = 0\nseconds_between_writes = 0\n"
    )
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "FEEDBACK_INSIGHTS_USER": "maria", **extra}


def _pending(workspace: Path) -> list[str]:
    """The pending drafts' ids (the sample also holds one following an issue filed by hand)."""
    with Warehouse(workspace / "feedback.duckdb") as wh:
        return [str(i) for (i,) in wh.con.execute("SELECT id FROM drafts WHERE status = 'pending' ORDER BY id").fetchall()]


def test_review_from_the_command_line(workspace: Path) -> None:
    one, two = _pending(workspace)[:2]
    listed = run_cli("drafts", "list", cwd=workspace, env=_env())
    with Warehouse(workspace / "feedback.duckdb") as wh:
        (count,) = wh.con.execute("SELECT count(*) FROM drafts").fetchall()[0]
    assert listed.returncode == 0 and "pending" in listed.stdout and f"{count} drafts" in listed.stdout
    editor = workspace / "editor.py"
    editor.write_text(EDITOR)
    edited = run_cli("drafts", "edit", one, cwd=workspace, env=_env(EDITOR=f"{sys.executable} {editor}"))
    assert edited.returncode == 0, edited.stderr
    assert "changed labels, workaround" in edited.stdout
    assert run_cli("drafts", "approve", one, cwd=workspace, env=_env()).returncode == 0
    shown = run_cli("drafts", "show", one, cwd=workspace, env=_env())
    assert "status approved · labels agent-feedback, pagination" in shown.stdout
    assert "workaround: Retry with page_size=50" in shown.stdout
    assert "<!-- feedback-insights:cluster=" in run_cli("drafts", "show", one, "--raw", cwd=workspace, env=_env()).stdout
    assert "edited by maria" in shown.stdout and "approved by maria" in shown.stdout
    no_reason = run_cli("drafts", "reject", two, cwd=workspace, env=_env())
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    assert run_cli("drafts", "reject", two, "--reason", "not ours", cwd=workspace, env=_env()).returncode == 0
    again = run_cli("drafts", "approve", one, cwd=workspace, env=_env())
    assert again.returncode == 1 and again.stderr.strip() == f"error: draft {one} is approved: only a pending or rejected draft can be approved"
    assert "approved" in run_cli("drafts", "list", "--status", "approved", cwd=workspace, env=_env()).stdout


def test_publish_dry_run_and_for_real(workspace: Path) -> None:
    one = _pending(workspace)[0]
    assert run_cli("drafts", "approve", one, cwd=workspace, env=_env()).returncode == 0
    dry = run_cli("publish", "--dry-run", cwd=workspace, env=_env())
    assert dry.returncode == 0 and f"would file draft {one} on acme/api" in dry.stdout
    missing_token = run_cli("publish", cwd=workspace, env={k: v for k, v in _env().items() if k != "FI_CLI_GITHUB_TOKEN"})
    assert missing_token.returncode == 2 and "set FI_CLI_GITHUB_TOKEN" in missing_token.stderr
    with running_github() as github:
        github.add_repo("acme/api")
        config = workspace / "feedback-insights.toml"
        config.write_text(config.read_text().replace("http://127.0.0.1:9", github.url))
        done = run_cli("publish", cwd=workspace, env=_env(FI_CLI_GITHUB_TOKEN=github.token))
        assert done.returncode == 0, done.stderr
        [issue] = github.issues("acme/api")
    assert f"filed draft {one}: {issue['html_url']}" in done.stdout and "1 filed" in done.stdout


def _records() -> list[dict]:
    base = {
        "received_at": "2026-11-20T10:00:00Z", "service": "acme-companies-api", "source": "http",
        "feedback": {"type": "unhelpful_error", "endpoint": "/contacts/export", "method": "POST", "outcome": "blocked",
                     "goal": "Export my contacts", "suggestion": "Name the field; cc @octocat"},
    }
    messages = ["Export fails with a bare 400 naming no field", "Bare 400 on /contacts/export, which field?",
                "The export 400 error does not say which field is invalid"]
    return [
        {**base, "id": f"fb_{i}", "account": f"acct_{i}", "feedback": {**base["feedback"], "message": m, "request_id": f"req_{i}"}}
        for i, m in enumerate(messages)
    ]


def test_draft_preview_treats_a_file_as_one_cluster(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "records.jsonl", _records())
    done = run_cli("draft-preview", "--input", str(tmp_path / "records.jsonl"), "--prompt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = orjson.loads(done.stdout)
    assert set(shown) == {"title", "body", "labels", "messages"}
    # "tool or endpoint: symptom": the cluster's name, no trailing period.
    assert shown["title"].startswith("/contacts/export: ") and not shown["title"].endswith(".")
    assert "Agents from **3 accounts** reported" in shown["body"] and "3 blocking" in shown["body"]
    assert "cc @&#8203;octocat" in shown["body"] and "acct_0" not in shown["body"]
    assert shown["labels"] == ["agent-feedback"]
    user = shown["messages"][1]["content"]
    assert user.count('<untrusted_report id="fb_') == 3


def test_draft_preview_names_the_bad_line(tmp_path: Path) -> None:
    records = _records()
    records[1]["feedback"]["outcome"] = "exploded"
    write_jsonl(tmp_path / "records.jsonl", records)
    done = run_cli("draft-preview", "--input", str(tmp_path / "records.jsonl"), cwd=tmp_path)
    assert done.returncode == 1 and "line 2" in done.stderr and "feedback.outcome" in done.stderr
    assert done.stderr.count("\n") == 1


def test_drafts_list_refuses_an_unknown_status_in_one_line(workspace: Path) -> None:
    done = run_cli("drafts", "list", "--status", "done", cwd=workspace, env=_env())
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: --status must be one of: pending, approved, rejected, filed, superseded (got 'done')\n"


def test_drafts_list_json_gives_every_field_a_script_needs(workspace: Path) -> None:
    from feedback_insights.drafts._review import LISTED

    done = run_cli("drafts", "list", "--json", cwd=workspace, env=_env())
    assert done.returncode == 0, done.stderr
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    with Warehouse(workspace / "feedback.duckdb") as wh:
        drafts = {i: (c, s, t) for i, c, s, t in wh.con.execute("SELECT id, cluster_id, status, title FROM drafts").fetchall()}
        figures = {r["cluster_id"]: r for r in demand(wh).iter_rows(named=True)}
    assert len(rows) == len(drafts) and all(list(row) == list(LISTED) for row in rows)  # every field, in order
    assert [row["status"] for row in rows] == sorted((row["status"] for row in rows), key=lambda s: s != "pending")
    for row in rows:
        assert (row["cluster_id"], row["status"], row["title"]) == drafts[row["id"]]
        now = figures[row["cluster_id"]]
        assert (row["accounts"], row["accounts_this_week"], row["accounts_last_week"], row["week"]) == (
            now["accounts"], now["accounts_this_week"], now["accounts_last_week"], now["week"])
        assert row["needs_review"] == now["needs_review"] and row["confidence"] == now["confidence"]
        assert row["created_at"] and row["updated_at"]
    filed = [row for row in rows if row["status"] == "filed"]  # the sample's issues filed by hand
    assert filed and all(row["issue_url"] and row["issue_number"] and row["repo"] for row in filed)
    pending = run_cli("drafts", "list", "--status", "pending", "--json", cwd=workspace, env=_env())
    assert {orjson.loads(line)["status"] for line in pending.stdout.splitlines()} == {"pending"}


def test_drafts_create_drafts_a_cluster_that_needs_review(clustered_sample: Path, tmp_path: Path) -> None:
    from feedback_insights.drafts import crosses_threshold

    path = sample_copy(clustered_sample, tmp_path)
    (tmp_path / "feedback-insights.toml").write_text('[warehouse]\npath = "feedback.duckdb"\n')
    with Warehouse(path) as wh:
        over = [row["cluster_id"] for row in demand(wh).sort("accounts", descending=True).iter_rows(named=True)
                if row["polarity"] == "problem" and row["status"] == "open"
                and crosses_threshold(row, embedded_default(path).drafts)]
        cluster = over[0]
        wh.con.execute("UPDATE clusters SET confidence = 0.2, needs_review = true WHERE id = ?", [cluster])
    stage = run_cli("draft", cwd=tmp_path, env=_env())
    assert stage.returncode == 0 and f"drafts create {cluster}" in stage.stdout
    with Warehouse(path) as wh:
        assert wh.con.execute("SELECT count(*) FROM drafts WHERE cluster_id = ?", [cluster]).fetchall() == [(0,)]
    done = run_cli("drafts", "create", str(cluster), cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    with Warehouse(path) as wh:
        [(draft_id, actor)] = wh.con.execute(
            """SELECT d.id, a.actor FROM drafts d JOIN draft_actions a ON a.draft_id = d.id
               WHERE d.cluster_id = ? AND a.action = 'drafted'""", [cluster]).fetchall()
    assert actor == "maria" and f"as draft {draft_id}" in done.stdout
    again = run_cli("drafts", "create", str(cluster), cwd=tmp_path, env=_env())
    assert again.returncode == 1 and again.stderr.startswith(f"error: cluster {cluster} already has draft {draft_id}")
    listed = run_cli("drafts", "list", "--json", cwd=tmp_path, env=_env())
    mine = [orjson.loads(line) for line in listed.stdout.splitlines() if orjson.loads(line)["id"] == draft_id]
    assert mine[0]["needs_review"] is True and mine[0]["confidence"] == 0.2
