"""Owner-private sources: nothing an owner wrote leaves the warehouse and the desk.

The sample's in-session rows come from the platform fake (a private source by default) with a
phrase planted in one owner's words, the turns they quote and their dictation. Every cluster is
drafted and filed on the GitHub fake; the week's digest is rendered, posted to a webhook and
mailed through a real SMTP server (aiosmtpd); known_issue entries are built. The phrase, and
each of its words, must be in none of them, and must be in the warehouse and on the desk (the
control: the search would have found it). The filed issues carry the counts and the pointers
the owner can open. A maintainer may still quote one report, explicitly, with who and why.
"""

from __future__ import annotations

import email
import re
import shutil
import socket
from collections.abc import Iterator
from email.policy import default
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from fastapi.testclient import TestClient

from feedback_insights.config import (
    Config,
    DeskConfig,
    DigestConfig,
    EmailConfig,
    FileDropConfig,
    GitHubConfig,
    HttpCollectorConfig,
)
from feedback_insights.desk import create_app
from feedback_insights.digest import Week, build, render, render_email, send_digest
from feedback_insights.drafts import approve
from feedback_insights.drafts._quotes import QuoteError, quote_report
from feedback_insights.ingest import ingest
from feedback_insights.ingest.sources import private_collectors
from feedback_insights.publish import IssueTracker, payloads, publish, records_to_forget
from feedback_insights.publish import forget as forget_records
from feedback_insights.warehouse import Warehouse

from .conftest import write_jsonl
from .github_fake import running_github
from .platform_fake import PHRASE, clustered_platform

KEY = "k" * 32
#: The phrase and each of its words: a key term, a title or a fingerprint could carry one alone.
PLANTED = (PHRASE, *PHRASE.split())


class Inbox:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append(envelope.original_content)
        return "250 OK"


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    box = Inbox()
    server = Controller(box, hostname="127.0.0.1", port=port)
    server.start()
    try:
        yield box, port
    finally:
        server.stop()


@pytest.fixture
def platform_warehouse(tmp_path_factory: pytest.TempPathFactory, embedder: Any, tmp_path: Path) -> Path:
    return Path(shutil.copyfile(clustered_platform(tmp_path_factory.getbasetemp(), embedder), tmp_path / "feedback.duckdb"))


def _found(text: str) -> list[str]:
    lowered = text.lower()
    return [word for word in PLANTED if word.lower() in lowered]


def _words(text: str) -> str:
    """Text as its words alone (lower case, letters and digits): escaping, quoting and line
    breaks cannot hide a sentence from the search."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _openings(wh: Warehouse) -> set[str]:
    """The first six words of every private report's own words and of the turn it quotes:
    any one of them in an output is a report quoted."""
    rows = wh.con.execute("""SELECT summary, json_extract_string(evidence, '$.target_text'),
                                    json_extract_string(evidence, '$.prompt_text') FROM records""").fetchall()
    return {" ".join(words[:6]) for row in rows for text in row if text and len(words := _words(text).split()) >= 6}


def _planted_records(wh: Warehouse) -> list[dict[str, Any]]:
    rows = wh.con.execute("SELECT id, trace_id, message_id, summary FROM records WHERE summary LIKE ?",
                          [f"%{PHRASE}%"]).fetchall()
    return [{"id": i, "trace_id": t, "message_id": m, "summary": s} for i, t, m, s in rows]


def test_nothing_an_owner_wrote_leaves_the_warehouse_and_the_desk(
    platform_warehouse: Path, hook: tuple[list[dict], str], inbox: tuple[Inbox, int], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received, hook_url = hook
    box, port = inbox
    with running_github() as gh:
        gh.add_repo("pags/console")
        monkeypatch.setenv("FI_TEST_GITHUB_TOKEN", gh.token)
        monkeypatch.setenv("FI_TEST_HOOK", hook_url)
        config = Config.model_validate({"warehouse": {"path": str(platform_warehouse)}, "privacy": {"hmac_key": KEY}})
        config = config.model_copy(update={
            "github": GitHubConfig(base_url=gh.url, token_env="FI_TEST_GITHUB_TOKEN", default_repo="pags/console",
                                   timeout=1, retries=3, backoff=0.05, seconds_between_writes=0),
            "digest": DigestConfig(folder=tmp_path / "digests", webhook_env="FI_TEST_HOOK", webhook_format="markdown",
                                   desk_url="https://desk.example",
                                   email=EmailConfig.model_validate({"host": "127.0.0.1", "port": port, "starttls": False,
                                                                     "from": "digest@example.com", "to": ["pm@example.com"]})),
        })
        with Warehouse(platform_warehouse) as wh:
            assert private_collectors(wh.con) == {"pags"}
            planted = _planted_records(wh)
            assert len(planted) >= 5  # the control: the warehouse holds the owner's words
            openings = _openings(wh)
            for (draft_id,) in wh.con.execute("SELECT id FROM drafts WHERE status = 'pending'").fetchall():
                approve(wh, draft_id, "maria")
            run = publish(config, wh, IssueTracker(config.github, gh.token, sleep=lambda s: None), {})
            assert run.errors == [] and run.filed
            filed = wh.con.execute(
                """SELECT d.issue_number, d.accounts, list(m.id) FROM drafts d
                   JOIN cluster_members m ON m.cluster_id = d.cluster_id AND m.view = 'reports'
                   WHERE d.status = 'filed' AND d.repo = 'pags/console' GROUP BY ALL""").fetchall()
            (latest,) = wh.con.execute("SELECT max(received_at) FROM records").fetchall()[0]
            digest = build(wh, Week.of(latest), desk_url="https://desk.example")
            assert any(card.get("private_reports") for card in digest.cards)
            markdown, html = render(digest, "md"), render(digest, "html")
            mail_html, mail_text, _ = render_email(digest)
            known = payloads(config.model_copy(update={"sources": [HttpCollectorConfig(
                kind="http", name="pags", url="http://127.0.0.1:9", key_env="UNUSED")]}), wh)
        send_digest(config, digest)

        issues = gh.issues("pags/console")
        comments = [c["body"] for issue in issues for c in gh.comments("pags/console", issue["number"])]
        # Every cluster was filed like any other, with its counts and the pointers the owner can open.
        by_number = {issue["number"]: issue for issue in issues}
        with_planted = [(n, accounts, ids) for n, accounts, ids in filed if {p["id"] for p in planted} & set(ids)]
        assert with_planted
        for number, accounts, ids in with_planted:
            body = by_number[number]["body"]
            assert f"**{accounts} account" in body and "Owner-private:" in body
            for report in planted:
                if report["id"] in ids:
                    assert report["id"] in body
                    assert all(pointer in body for pointer in (report["trace_id"], report["message_id"]) if pointer)

    posted = [post["text"] for post in received]
    mailed = [email.message_from_bytes(m, policy=default).as_string() for m in box.messages]
    assert posted and mailed and known
    outputs = {
        "GitHub titles": [i["title"] for i in issues], "GitHub bodies": [i["body"] for i in issues],
        "GitHub comments": comments, "digest md": [markdown], "digest html": [html],
        "email html": [mail_html], "email text": [mail_text], "email sent": mailed, "webhook": posted,
        "digest files": [p.read_text(encoding="utf-8") for p in (tmp_path / "digests").glob("*")],
        # (the meaning's centroid is numbers: a digit run in it is no one's words)
        "known_issue": [str([issue, {k: v for k, v in match.items() if k != "meaning"}]) for *_, issue, match in known],
    }
    leaks = {where: _found(text) for where, texts in outputs.items() for text in texts if _found(text)}
    assert leaks == {}
    # Nor any other owner's words: no output holds the opening of any private report or turn.
    quoted = {where: [o for o in openings if o in _words(text)] for where, texts in outputs.items() for text in texts}
    assert {where: found for where, found in quoted.items() if found} == {}
    # The desk shows the owner's words (it is the owner's side of the line).
    desk = Config.model_validate({"warehouse": {"path": str(platform_warehouse)}, "privacy": {"hmac_key": KEY}})
    desk = desk.model_copy(update={"desk": DeskConfig(reviewer="rita")})
    with Warehouse(platform_warehouse) as wh:
        (cluster_id,) = wh.con.execute(
            "SELECT min(cluster_id) FROM cluster_members WHERE view = 'reports' AND list_contains(?, id)",
            [[p["id"] for p in planted]]).fetchall()[0]
    with TestClient(create_app(desk, "127.0.0.1", None), base_url="http://127.0.0.1:8790") as client:
        assert PHRASE in client.get(f"/clusters/{cluster_id}").text


def test_a_maintainer_may_quote_one_private_report_recorded_with_who_and_why(platform_warehouse: Path) -> None:
    config = Config.model_validate({"warehouse": {"path": str(platform_warehouse)}, "privacy": {"hmac_key": KEY}})
    with Warehouse(platform_warehouse) as wh:
        draft_id, record_id, other = wh.con.execute(
            """SELECT d.id, min(r.id), max(r.id) FROM drafts d
               JOIN cluster_members m ON m.cluster_id = d.cluster_id AND m.view = 'reports'
               JOIN records r ON r.collector = m.collector AND r.id = m.id
               WHERE d.status = 'pending' AND r.summary LIKE ? GROUP BY d.id ORDER BY d.id LIMIT 1""",
            [f"%{PHRASE}%"]).fetchall()[0]
        (before,) = wh.con.execute("SELECT body FROM drafts WHERE id = ?", [draft_id]).fetchall()[0]
        assert PHRASE not in before
        with pytest.raises(QuoteError, match="who quotes it and why"):
            quote_report(wh, config.drafts, draft_id, "pags", record_id, "rita", "   ")
        quoted = quote_report(wh, config.drafts, draft_id, "pags", record_id, "rita", "the owner agreed on the call")
        assert quoted.rendered
        (after,) = wh.con.execute("SELECT body FROM drafts WHERE id = ?", [draft_id]).fetchall()[0]
        assert PHRASE in after and after.count("*Owner-private:*") == before.count("*Owner-private:*") - 1
        assert wh.con.execute("SELECT actor, reason FROM draft_quotes WHERE id = ?", [record_id]).fetchall() == [
            ("rita", "the owner agreed on the call")]
        action = wh.con.execute("SELECT actor, detail FROM draft_actions WHERE draft_id = ? AND action = 'quoted'",
                                [draft_id]).fetchall()
        assert action[0][0] == "rita" and record_id in action[0][1]
        if other != record_id:  # one report, not the source: the others stay unquoted
            assert wh.con.execute("SELECT count(*) FROM draft_quotes WHERE id = ?", [other]).fetchall()[0][0] == 0
        # Erasing the report erases its quote.
        forget_records(config, wh, records_to_forget(config, wh, record=record_id, collector="pags"), "rita", "asked")
        assert wh.con.execute("SELECT count(*) FROM draft_quotes").fetchall()[0][0] == 0


def test_every_source_declares_its_privacy_and_a_change_reaches_the_warehouse(tmp_path: Path) -> None:
    (tmp_path / "drop").mkdir()
    drop = write_jsonl(tmp_path / "drop" / "a.jsonl", [
        {"id": "r1", "ts": 1794508847000, "user_id": "usr-1", "instance_id": "i-1", "surface": "chat",
         "body": "The agent lost the roster."}])
    source = FileDropConfig(kind="files", name="drop", path=drop.parent, dialect="session", service="pags-console")
    config = Config.model_validate({"warehouse": {"path": str(tmp_path / "w.duckdb")}, "privacy": {"hmac_key": KEY}})
    with Warehouse(config.warehouse.path) as wh:
        ingest(config.model_copy(update={"sources": [source]}), wh)
        assert private_collectors(wh.con) == set()
        # Declared private later, with nothing new to read: the declaration still reaches the warehouse.
        ingest(config.model_copy(update={"sources": [source.model_copy(update={"private": True})]}), wh)
        assert private_collectors(wh.con) == {"drop"}


def test_the_digest_says_a_thumb_in_words_and_markdown_has_no_visible_entity(platform_warehouse: Path) -> None:
    with Warehouse(platform_warehouse) as wh:
        (latest,) = wh.con.execute("SELECT max(received_at) FROM records").fetchall()[0]
        digest = build(wh, Week.of(latest))
    html, markdown = render(digest, "html"), render(digest, "md")
    assert "👎 (thumbs down)" in html and "👎" not in html.replace("👎 (thumbs down)", "")
    assert "&#8203;" not in markdown and "[filed as #\u200b503](https://github.com/pags-dev/platform/issues/503)" in markdown


def test_an_llm_is_never_shown_a_private_report(platform_warehouse: Path) -> None:
    """The endpoint is outside the warehouse: the prompt holds no private report's words, and a
    cluster of private reports alone is drafted from the templates without a call (an endpoint
    that cannot be reached would otherwise leave its error on the draft)."""
    from feedback_insights.clusters import demand
    from feedback_insights.config import LLMConfig
    from feedback_insights.drafts import ChatClient, draft_input, llm_draft, prompt_messages

    config = Config.model_validate({"warehouse": {"path": str(platform_warehouse)}, "privacy": {"hmac_key": KEY}})
    with Warehouse(platform_warehouse) as wh:
        figures = demand(wh)
        planted = {c for (c,) in wh.con.execute(
            """SELECT DISTINCT m.cluster_id FROM cluster_members m JOIN records r ON r.collector = m.collector AND r.id = m.id
               WHERE m.view = 'reports' AND r.summary LIKE ?""", [f"%{PHRASE}%"]).fetchall()}
        rows = [row for row in figures.iter_rows(named=True) if row["cluster_id"] in planted]
        assert rows
        for row in rows:
            inputs = draft_input(wh, row)
            assert inputs.private_reports == len(inputs.reports)
            messages = prompt_messages(inputs, config.drafts, 8000)
            assert not _found(" ".join(m["content"] for m in messages))
            unreachable = ChatClient(LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout=0.5, retries=0))
            drafted = llm_draft(inputs, config.drafts, unreachable)
            assert (drafted.drafted_by, drafted.llm_error, drafted.calls) == ("template", None, [])
            assert not _found(drafted.title + drafted.body)
