"""The ``platform`` source: the sample's in-session rows read through the platform's own API
(the strict fake in ``platform_fake.py``, on 127.0.0.1) over HTTP and over MCP, per owner;
status changes and deletions at the platform reaching the warehouse and the digest; listings
that are full never taken for deletions; refusals and rate limits; a run stopped half-way;
write-back through ``PATCH /v1/feedback/:id`` and ``resolve_feedback`` with the platform's audit.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from feedback_insights.config import Config, ConfigError, GitHubConfig
from feedback_insights.config._loader import load
from feedback_insights.digest import Week, build
from feedback_insights.drafts import approve
from feedback_insights.ingest import ingest
from feedback_insights.publish import IssueTracker, publish
from feedback_insights.warehouse import Warehouse

from .github_fake import GitHubFake, running_github
from .platform_fake import (
    PlatformFake,
    RunningPlatform,
    clustered_platform,
    owner_env,
    planted_owner,
    platform_source,
    running_platform,
    sample_fake,
    token_of,
)

KEY = "k" * 32
ISSUE_CONFIG = """
[privacy]
hmac_key = "{key}"

[[sources]]
name = "pags"
kind = "platform"
url = "https://api.example.com"   # base of /v1/feedback; with transport = "mcp", the MCP endpoint
transport = "http"                # or "mcp"
service = "pags-console"
owners = [{{ token_env = "PAGS_TOKEN_ALICE" }}, {{ token_env = "PAGS_TOKEN_BOB" }}]
"""


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The sample's rows (the phrase planted) on a running fake, every owner's token set."""
    with running_platform(sample_fake()) as running:
        for name, token in owner_env(running.fake).items():
            monkeypatch.setenv(name, token)
        yield running


def _config(path: Path, running: RunningPlatform, transport: str = "http", **settings: Any) -> Config:
    return Config.model_validate({"warehouse": {"path": str(path)}, "privacy": {"hmac_key": KEY},
                                  "sources": [platform_source(running, transport, **settings)]})


def _stored(wh: Warehouse) -> dict[str, tuple[str, str | None, str | None, str | None]]:
    rows = wh.con.execute("SELECT id, status, issue_url, trace_id, message_id FROM records WHERE collector = 'pags'").fetchall()
    return {i: (status, url, trace, message) for i, status, url, trace, message in rows}


def test_the_configuration_is_the_issue_s_and_private_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "fi.toml"
    path.write_text(ISSUE_CONFIG.format(key=KEY), encoding="utf-8")
    (source,) = load(path).sources
    assert (source.kind, source.transport, source.private, source.write_back) == ("platform", "http", True, True)
    assert [o.token_env for o in source.owners] == ["PAGS_TOKEN_ALICE", "PAGS_TOKEN_BOB"]
    monkeypatch.setenv("PAGS_TOKEN_ALICE", "alice-token")
    monkeypatch.delenv("PAGS_TOKEN_BOB", raising=False)
    with pytest.raises(ConfigError, match=r"set PAGS_TOKEN_BOB to an owner's platform token"):
        source.check_secrets()
    # A token is never written in the file.
    path.write_text(ISSUE_CONFIG.format(key=KEY).replace('{ token_env = "PAGS_TOKEN_BOB" }', '{ token = "bob-token" }'),
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sources\.0\.owners\.1\.token: unknown key"):
        load(path)
    other = tomllib.loads(ISSUE_CONFIG.format(key=KEY).replace('kind = "platform"', 'kind = "sql"\npath = "x.sqlite"')
                          .replace('transport = "http"', "").replace("url = ", "# url = ")
                          .replace("owners = ", "# owners = "))
    assert Config.model_validate(other).sources[0].private is False  # other kinds: shared unless declared


@pytest.mark.parametrize("transport", ["http", "mcp"])
def test_the_sample_rows_reach_the_warehouse_and_follow_the_platform(
    platform: RunningPlatform, tmp_path: Path, transport: str
) -> None:
    fake = platform.fake
    config = _config(tmp_path / "w.duckdb", platform, transport)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        assert summary.errors == []
        stored = _stored(wh)
        valid = {i: r for i, r in fake.rows.items() if r["body"] and r["surface"] in ("chat", "coding", "board", "apply", "other")}
        assert summary.counts.quarantined == len(fake.rows) - len(valid) == 3
        # Every row once, with the pointers (§7) and its status.
        assert stored == {i: (r["status"], r["issue_url"], r["trace_id"], r["message_id"]) for i, r in valid.items()}
        voice = next(r for r in valid.values() if (r["context"] or {}).get("audioKey"))
        (evidence, context) = wh.con.execute(
            "SELECT evidence, context FROM records WHERE id = ?", [voice["id"]]).fetchall()[0]
        assert voice["target_text"].split()[0] in evidence and voice["context"]["audioKey"] in context
        # Read again: nothing new, nothing twice.
        again = ingest(config, wh)
        assert (again.counts.new, again.counts.already, again.errors) == (0, len(valid), [])

        # At the platform: a row dismissed, one deleted, an instance (and its rows) gone.
        (latest,) = wh.con.execute("SELECT max(received_at) FROM records").fetchall()[0]
        week = Week.of(latest)
        in_week = {i for i, r in valid.items() if week.start.timestamp() * 1000 <= r["ts"] < week.end.timestamp() * 1000}
        live = sorted(i for i in in_week if valid[i]["status"] != "dismissed")
        dismissed, deleted = live[0], live[1]
        instance = next(valid[i]["instance_id"] for i in live[2:]
                        if valid[i]["instance_id"] not in (valid[dismissed]["instance_id"], valid[deleted]["instance_id"]))
        gone = {i for i, r in valid.items() if r["instance_id"] == instance}
        before = build(wh, week).headline["reports"]
        fake.set_status(dismissed, "dismissed")
        fake.delete(deleted)
        fake.delete_instance(instance)
        after_run = ingest(config, wh)
        assert after_run.errors == [] and after_run.forgotten == len(gone) + 1
        stored = _stored(wh)
        assert stored[dismissed][0] == "dismissed"
        assert not (gone | {deleted}) & set(stored)
        # The digest follows: the week counts neither the dismissed row nor the deleted ones.
        left = {dismissed, deleted} | {i for i in gone & in_week if valid[i]["status"] != "dismissed"}
        assert build(wh, week).headline["reports"] == before - len(left)
        history = wh.con.execute("SELECT status FROM record_status_history WHERE id = ? ORDER BY seen_at", [dismissed]).fetchall()
        assert history[-1] == ("dismissed",)


def test_a_full_listing_is_read_per_status_and_instance_and_never_taken_for_a_deletion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = PlatformFake(max_limit=4)
    row = {"user_id": "usr-a", "surface": "chat", "author": "user", "context": None}
    rows = [("a1", "inst-a", "open", 600), ("a2", "inst-a", "open", 500), ("a3", "inst-a", "open", 400),
            ("b1", "inst-b", "open", 300), ("b2", "inst-b", "open", 200), ("b3", "inst-b", "filed", 100)]
    for feedback_id, instance, status, ts in rows:
        fake.add_row({**row, "id": feedback_id, "instance_id": instance, "status": status, "ts": 1794508847000 + ts,
                      "body": f"The agent dropped the roster again, case {feedback_id}."})
    fake.add_token("tok-a", "usr-a")
    monkeypatch.setenv("PAGS_TOKEN_0", "tok-a")
    with running_platform(fake) as running, Warehouse(tmp_path / "w.duckdb") as wh:
        config = _config(tmp_path / "w.duckdb", running, page_size=4)
        config = config.model_copy(update={"sources": [config.sources[0].model_copy(
            update={"owners": config.sources[0].owners[:1]})]})
        # Six rows, no listing holds more than four: read per status, then per instance.
        assert ingest(config, wh).errors == []
        assert set(_stored(wh)) == {r[0] for r in rows}
        fake.delete("b2")  # a complete listing no longer has it: forgotten
        assert ingest(config, wh).forgotten == 1 and "b2" not in _stored(wh)
        for n in range(4):  # instance a's open rows now fill a listing: older ones may be behind it
            fake.add_row({**row, "id": f"a{n + 4}", "instance_id": "inst-a", "status": "open",
                          "ts": 1794508848000 + n, "body": f"The roster is wrong, case {n}."})
        fake.delete("a1")
        summary = ingest(config, wh)
        assert summary.forgotten == 0 and "a1" in _stored(wh)  # gone from a page, not from the platform
        (line,) = summary.errors
        assert "instance inst-a has 4 or more open rows" in line and "nothing was forgotten" in line
        assert "$PAGS_TOKEN_0" in line and "tok-a" not in line


@pytest.mark.parametrize("transport", ["http", "mcp"])
def test_refusals_name_the_owner_never_the_token_and_rate_limits_are_waited_out(
    platform: RunningPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    fake = platform.fake
    config = _config(tmp_path / "w.duckdb", platform, transport, retries=2)
    with Warehouse(config.warehouse.path) as wh:
        fake.throttle(1, retry_after=1)
        assert ingest(config, wh).errors == []
        (limited, retried) = [(at, status) for at, via, _, status in fake.requests[:2]]
        assert limited[1] == 429 and retried[1] == 200 and retried[0] - limited[0] >= 1.0  # Retry-After honoured
        stored = set(_stored(wh))
        # One owner's token is no owner's any more (401); another's row was deleted meanwhile.
        wrong = "not-a-pags-token-0123456789"
        monkeypatch.setenv("PAGS_TOKEN_0", wrong)
        victim = next(i for i in stored if fake.rows[i]["user_id"] != fake.owners()[0])
        fake.delete(victim)
        summary = ingest(config, wh)
        (line,) = summary.errors
        assert "$PAGS_TOKEN_0" in line and "401" in line and "nothing was forgotten" in line
        assert victim in _stored(wh)  # an owner unread: no listing is complete
        run_error = wh.con.execute("SELECT error FROM ingest_runs ORDER BY id DESC LIMIT 1").fetchall()[0][0]
        everything = " ".join(str(v) for table in ("records", "quarantine", "source_cursors", "ingest_runs")
                              for v in wh.con.execute(f"SELECT * FROM {table}").fetchall())
        for token in (wrong, *(token_of(u) for u in fake.owners())):
            assert token not in line and token not in run_error and token not in everything


def test_a_run_stopped_half_way_resumes_with_nothing_lost_or_doubled(platform: RunningPlatform, tmp_path: Path) -> None:
    config = _config(tmp_path / "w.duckdb", platform)
    seen: list[int] = []

    def stop(name: str, count: int) -> None:
        seen.append(count)
        if len(seen) == 3:
            raise KeyboardInterrupt  # as a kill would, between two stored batches

    with Warehouse(config.warehouse.path) as wh:
        with pytest.raises(KeyboardInterrupt):
            ingest(config, wh, on_batch=stop)
        partly = len(_stored(wh))
        assert 0 < partly < 81
        assert ingest(config, wh).errors == []
        ids = [i for (i,) in wh.con.execute("SELECT id FROM records").fetchall()]
        assert len(ids) == len(set(ids)) == 81


# -- write-back through the platform --------------------------------------------------------------


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Any:
    with running_github() as gh:
        gh.add_repo("pags/console")
        monkeypatch.setenv("FI_TEST_GITHUB_TOKEN", gh.token)
        yield gh


def _publishing(path: Path, running: RunningPlatform, gh: GitHubFake, transport: str) -> Config:
    github = GitHubConfig(base_url=gh.url, token_env="FI_TEST_GITHUB_TOKEN", default_repo="pags/console",
                          timeout=1, retries=3, backoff=0.05, seconds_between_writes=0)
    return _config(path, running, transport).model_copy(update={"github": github})


def _tracker(config: Config) -> IssueTracker:
    return IssueTracker(config.github, config.github.token(), sleep=lambda seconds: None)


@pytest.mark.parametrize("transport", ["http", "mcp"])
def test_a_filed_issue_s_url_reaches_the_platform_audited_and_a_refusal_is_retried(
    platform: RunningPlatform, github: GitHubFake, tmp_path_factory: pytest.TempPathFactory, embedder: Any, tmp_path: Path,
    transport: str,
) -> None:
    fake = platform.fake
    path = Path(shutil.copyfile(clustered_platform(tmp_path_factory.getbasetemp(), embedder), tmp_path / "w.duckdb"))
    config = _publishing(path, platform, github, transport)
    # One owner's token may read but not write.
    read_only = planted_owner(fake)
    fake.add_token(token_of(read_only), read_only, scopes=("read",))
    with Warehouse(path) as wh:
        for (draft_id,) in wh.con.execute("SELECT id FROM drafts WHERE status = 'pending'").fetchall():
            approve(wh, draft_id, "maria")
        run = publish(config, wh, _tracker(config), {})
        filed = dict(wh.con.execute(
            """SELECT r.id, d.issue_url FROM drafts d JOIN cluster_members m ON m.cluster_id = d.cluster_id
               JOIN records r ON r.collector = m.collector AND r.id = m.id
               WHERE d.status = 'filed' AND m.view = 'reports' AND r.status IN ('open', 'triaged')""").fetchall())
        assert filed and run.filed
        refused = {i for i in filed if fake.rows[i]["user_id"] == read_only}
        assert refused and len(run.errors) == len(refused)  # one line per refused row
        assert all("refused" in line and "tried again next run" in line and "403" in line for line in run.errors)
        written = set(filed) - refused
        assert run.written_back == len(written)
        for row_id in written:
            assert (fake.rows[row_id]["status"], fake.rows[row_id]["issue_url"]) == ("filed", filed[row_id])
        audited = {(a["feedback_id"], a["issue_url"]) for a in fake.audit}
        assert audited == {(i, filed[i]) for i in written}
        assert {a["tool"] for a in fake.audit} == {"resolve_feedback" if transport == "mcp" else "PATCH /v1/feedback/:id"}
        logged = {(i, url) for i, url in wh.con.execute("SELECT id, issue_url FROM write_backs").fetchall()}
        assert logged == audited
        # Granted the write scope, the refused rows are written on the next run, and nothing twice;
        # one of them deleted at the platform meanwhile answers 404: it is forgotten.
        fake.add_token(token_of(read_only), read_only)
        deleted = sorted(refused)[0]
        fake.delete(deleted)
        again = publish(config, wh, _tracker(config), {})
        assert again.errors == [] and again.written_back == len(refused) - 1
        assert len(fake.audit) == len(filed) - 1
        assert deleted not in _stored(wh)
        assert wh.con.execute("SELECT count(*) FROM erasures WHERE reason LIKE '%404 on write-back%'").fetchall() == [(1,)]
        # The next ingest reads the rows back as filed.
        ingest(config, wh)
        assert all(_stored(wh)[i][:2] == ("filed", filed[i]) for i in filed if i != deleted)


@pytest.mark.parametrize("transport", ["http", "mcp"])
def test_the_fake_is_as_strict_as_the_platform_design(platform: RunningPlatform, transport: str) -> None:
    """Owner scoping, the limit, the row shape of §§5 and 7 and the write permission, through the
    source's own clients."""
    from feedback_insights.ingest.sources import NotFound, Refused
    from feedback_insights.ingest.sources._platform_http import HttpFeedbackApi
    from feedback_insights.ingest.sources._platform_mcp import McpFeedbackApi

    fake = platform.fake
    alice, bob = fake.owners()[:2]
    url = platform.url if transport == "http" else platform.mcp_url
    kind = HttpFeedbackApi if transport == "http" else McpFeedbackApi
    api = kind(url, token_of(alice), "PAGS_TOKEN_0", retries=0)
    rows = api.list(None, None, 200)
    assert rows and {r["user_id"] for r in rows} == {alice}  # only the caller's rows
    assert [r["ts"] for r in rows] == sorted((r["ts"] for r in rows), reverse=True)  # newest first
    assert len(api.list(None, None, 2)) == 2
    assert {"trace_id", "message_id", "session_id", "timeline_seq", "target_role", "target_text", "target_at",
            "prompt_text", "context", "sentiment", "status", "issue_url"} <= set(rows[0])
    bobs = next(r for r in fake.rows.values() if r["user_id"] == bob)
    with pytest.raises(NotFound):
        api.list(None, bobs["instance_id"], 10)  # another owner's instance
    with pytest.raises(NotFound):
        api.resolve(bobs["id"], "filed", "https://github.com/pags/console/issues/1")  # another owner's row
    with pytest.raises(Refused, match="401"):
        kind(url, "no-such-token-0000", "PAGS_TOKEN_X", retries=0).list(None, None, 10)
    fake.add_token("alice-read-only", alice, scopes=("read",))
    with pytest.raises(Refused, match="403"):
        kind(url, "alice-read-only", "PAGS_TOKEN_R", retries=0).resolve(rows[0]["id"], "filed", None)
    assert fake.audit == [] and fake.rows[bobs["id"]]["status"] == bobs["status"]
    done = api.resolve(rows[0]["id"], "filed", "https://github.com/pags/console/issues/1")
    assert done["status"] == "filed" and fake.audit[0]["feedback_id"] == rows[0]["id"]
    assert fake.audit[0]["tool"] == ("resolve_feedback" if transport == "mcp" else "PATCH /v1/feedback/:id")
