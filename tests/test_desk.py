"""The review desk at the HTTP level: its pages over a drafted copy of the sample, its security
(sessions, login, CSRF, headers, host), its turns with the flows on the warehouse, and hostile
input answered with 4xx pages. Starlette's TestClient drives the real app; one test runs the
real ``feedback-insights desk`` command and talks to it over 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from feedback_insights.config import SAMPLE_HMAC_KEY, Config, DeskConfig, embedded_default
from feedback_insights.desk import MAX_SESSIONS, DeskRefused, Sessions, create_app, serve, server_config
from feedback_insights.drafts import (
    ReviewError,
    edit_form,
    get_draft,
    history,
    save_edit,
    save_fields,
)
from feedback_insights.warehouse import Warehouse, exclusive

from .conftest import drafted_copy, run_cli

BASE = "http://127.0.0.1:8790"
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
REVIEWER = "rita"
TOKEN = "desk-test-token-0123456789abcdef"


def desk_config(path: Path, **desk: object) -> Config:
    """The embedded default over the warehouse at ``path``, decisions recorded as rita."""
    return embedded_default(path).model_copy(update={"desk": DeskConfig(reviewer=REVIEWER, **desk)})


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` served as ``feedback-insights desk`` serves it (its protocol and limits) on
    127.0.0.1 (a free port), in a thread, until the block ends; yields its address."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app, app.state.desk.config.desk))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        # The browser resolves no host name but localhost (conftest.py), and maps IP literals too.
        yield f"http://localhost:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def flash_of(html: str) -> str:
    """The page's notes of the last action, as read (their links' text, not their tags)."""
    found = re.search(r'<div class="flash" role="status">(.*?)</div>', html, re.S)
    return re.sub(r"<[^>]+>", "", found.group(1)) if found else ""


def alert_of(html: str) -> str:
    found = re.search(r'role="alert">([^<]*)<', html)
    return found.group(1) if found else ""


def pending(path: Path) -> list[int]:
    with Warehouse(path) as wh:
        return [i for (i,) in wh.con.execute("SELECT id FROM drafts WHERE status = 'pending' ORDER BY id").fetchall()]


@pytest.fixture
def warehouse(clustered_sample: Path, tmp_path: Path) -> Path:
    return drafted_copy(clustered_sample, tmp_path)


@pytest.fixture
def client(warehouse: Path) -> Iterator[TestClient]:
    with TestClient(create_app(desk_config(warehouse), "127.0.0.1", None, lock_wait=0.3), base_url=BASE) as c:
        yield c


def _post(client: TestClient, url: str, page: str, **fields: object) -> httpx.Response:
    """A form posted as the page at ``page`` posts it: with that page's CSRF token."""
    token = csrf_of(client.get(page).text)
    return client.post(url, data={"csrf": token, **fields}, follow_redirects=False)


def test_every_page_renders_with_the_strict_headers(client: TestClient, warehouse: Path) -> None:
    draft_id = pending(warehouse)[0]
    with Warehouse(warehouse) as wh:
        (cluster_id,) = wh.con.execute("SELECT cluster_id FROM drafts WHERE id = ?", [draft_id]).fetchone() or (0,)
    pages = ["/drafts", "/drafts?status=pending&review=no", f"/drafts/{draft_id}", "/clusters",
             "/clusters?status=all&view=goals", f"/clusters/{cluster_id}", "/unclustered",
             "/unclustered?service=pags-console", "/digests", "/digests/2026-W48"]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, (url, alert_of(response.text))
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
        assert "http://" not in re.sub(r'href="http[^"]*"', "", response.text), f"{url} loads a remote resource"
    css = client.get("/static/desk.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "@import" not in css.text and "url(" not in css.text


def test_a_draft_is_shown_as_github_renders_it_beside_its_evidence(client: TestClient, warehouse: Path) -> None:
    draft_id = pending(warehouse)[0]
    with Warehouse(warehouse) as wh:
        draft = get_draft(wh, draft_id)
    html = client.get(f"/drafts/{draft_id}").text
    assert 'class="markdown-body"' in html and "<blockquote>" in html  # quoted reports, rendered
    assert "feedback-insights:cluster=" not in html.split('class="markdown-body"')[1].split("</article>")[0]
    assert f"{draft['title']}" in html.replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&")
    evidence = html.split('id="evidence"')[1]
    assert evidence.count('class="report-meta"') >= 3  # the cluster's reports, each with its id
    assert "nothing yet" not in html.split('id="history"')[1].split("</section>")[0]  # drafted by the pipeline


def test_drafts_queue_filters_and_puts_pending_first(client: TestClient) -> None:
    html = client.get("/drafts").text
    sections = html.split("<section")[1:]  # one per kind of cluster (problems, requests)
    assert sections and 'id="kind-1">Problems' in sections[0]
    for section in sections:
        statuses = re.findall(r'class="status s-(\w+)"', section)
        assert statuses and statuses[0] == "pending"
        assert statuses == sorted(statuses, key=lambda s: s != "pending")
    assert "filed" in re.findall(r'class="status s-(\w+)"', html)
    filed = re.findall(r'class="status s-(\w+)"', client.get("/drafts?status=filed").text)
    assert filed and set(filed) == {"filed"}
    service = client.get("/drafts?service=orbit-mcp").text
    rows = re.findall(r'<td data-label="Service">(orbit-mcp|acme-companies-api|pags-console|—)</td>', service)
    assert rows and set(rows) == {"orbit-mcp"}


def test_review_actions_are_the_library_s_and_recorded_as_the_configured_reviewer(client: TestClient, warehouse: Path) -> None:
    one, two = pending(warehouse)[:2]
    page = f"/drafts/{one}"
    with Warehouse(warehouse) as wh:
        before = get_draft(wh, one)
    body = before["body"].replace("\n", "\r\n")  # as a browser sends a textarea
    edited = _post(client, f"{page}/edit", page, title=before["title"], labels="agent-feedback, pagination",
                   workaround="Retry with page_size=50", body=body, actor="mallory", by="mallory")
    assert edited.status_code == 303 and edited.headers["location"] == page
    assert "changed labels, workaround" in client.get(page).text
    same = _post(client, f"{page}/edit", page, title=before["title"], labels="agent-feedback, pagination",
                 workaround="Retry with page_size=50", body=body)
    assert same.status_code == 303 and "no change" in client.get(page).text
    assert _post(client, f"{page}/approve", page, reviewer="mallory").status_code == 303
    again = _post(client, f"{page}/approve", page)
    assert again.status_code == 409
    assert alert_of(again.text) == f"draft {one} is approved: only a pending or rejected draft can be approved"
    assert _post(client, f"/drafts/{two}/reject", f"/drafts/{two}", reason="  not ours  ").status_code == 303
    with Warehouse(warehouse) as wh:
        approved, rejected = get_draft(wh, one), get_draft(wh, two)
        actions = [(a["action"], a["actor"]) for a in history(wh, one)]
    assert approved["status"] == "approved" and approved["reviewed_by"] == REVIEWER
    assert approved["labels"] == ["agent-feedback", "pagination"] and approved["workaround"] == "Retry with page_size=50"
    assert approved["body"] == before["body"]  # CRLF made LF: the body did not change
    assert ("edited", REVIEWER) in actions and ("approved", REVIEWER) in actions
    assert all(actor != "mallory" for _, actor in actions)
    assert rejected["status"] == "rejected" and rejected["reject_reason"] == "not ours"


def test_an_edit_that_drops_the_marker_gets_it_back(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    _post(client, f"{page}/edit", page, title="A shorter title", labels="", workaround="", body="Just words.\n")
    with Warehouse(warehouse) as wh:
        draft = get_draft(wh, one)
    assert draft["title"] == "A shorter title" and draft["labels"] == [] and draft["workaround"] is None
    assert draft["body"].startswith(f"<!-- feedback-insights:cluster={draft['cluster_id']} -->")


def test_bad_values_are_400_pages_naming_the_field(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    cases = [
        (f"{page}/reject", {"reason": "   "}, "reason: say why you reject it"),
        (f"{page}/edit", {"title": "", "body": "x"}, "title: must not be empty"),
        (f"{page}/edit", {"title": "two\nlines", "body": "x"}, "title: one line"),
        (f"{page}/edit", {"title": "t", "body": "x", "labels": "a" * 51}, "labels: "),
        (f"{page}/edit", {"title": "t", "body": "x" * 60_001}, "body: at most 60,000 characters"),
        (f"{page}/edit", {"title": "t", "body": "x", "workaround": "a\nb"}, "workaround: one line"),
    ]
    for url, fields, message in cases:
        response = _post(client, url, page, **fields)
        assert response.status_code == 400, (url, fields, response.status_code)
        assert alert_of(response.text).startswith(message), alert_of(response.text)
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["status"] == "pending"
    for url, message in [("/drafts?status=nope", "status: must be one of"),
                         ("/clusters?view=x", "view: must be one of"), ("/digests/2026-X1", "week: expected an ISO week"),
                         ("/clusters?review=maybe", "review: must be one of")]:
        response = client.get(url)
        assert response.status_code == 400 and alert_of(response.text).startswith(message), (url, response.text[-300:])
    # A path that names no draft is one plain sentence, not a validator's message.
    for url, shown in [("/drafts/abc", "abc"), (f"/drafts/{2**70}", str(2**70)), ("/clusters/1.5", "1.5")]:
        response = client.get(url)
        thing = url.split("/")[1][:-1]
        assert response.status_code == 404, url
        assert alert_of(response.text) == (f"There is no {thing} \u201c{shown}\u201d: {thing}s are numbered 1, 2, 3 "
                                           "and so on."), alert_of(response.text)


def test_unknown_ids_are_404_pages(client: TestClient, warehouse: Path) -> None:
    for url, message in [("/drafts/99999", "no draft 99999"), ("/clusters/99999", "no cluster 99999"),
                         ("/digests/1999-W01", "no reports in 1999-W01"), ("/nowhere", "no such page")]:
        response = client.get(url)
        assert response.status_code == 404 and alert_of(response.text) == message
        assert response.headers["content-security-policy"] == CSP
    form = f"/drafts/{pending(warehouse)[0]}"
    gone = _post(client, "/drafts/99999/approve", form)
    assert gone.status_code == 404 and alert_of(gone.text) == "no draft 99999"
    merge = _post(client, "/clusters/99999/merge", form, other="1")
    assert merge.status_code == 404


def test_every_post_needs_the_session_s_csrf_token(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    posts = sorted(route.path.replace("{draft_id}", str(one)).replace("{cluster_id}", "1")
                   for route in _routes(client.app.routes) if "POST" in route.methods)
    assert len(posts) >= 10  # login, logout, 3 review actions, 5 corrections
    client.get("/drafts")
    stranger = TestClient(client.app, base_url=BASE)
    other_token = csrf_of(stranger.get(f"/drafts/{one}").text)  # a valid token, of another session
    for url in posts:
        for data in ({}, {"csrf": "forged"}, {"csrf": other_token}):
            response = client.post(url, data={**data, "reason": "x", "other": "2"}, follow_redirects=False)
            assert response.status_code == 403, (url, data, response.status_code)
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["status"] == "pending"


def _routes(routes: list) -> Iterator:
    """Every route of the app, inside the routers it includes too."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes)
        elif getattr(route, "methods", None):
            yield route


def test_a_request_for_another_host_name_is_refused(client: TestClient) -> None:
    """DNS rebinding: a page on evil.example pointed at 127.0.0.1 sends its own host name."""
    assert client.get("/drafts", headers={"host": "evil.example:8790"}).status_code == 421
    assert client.get("/drafts", headers={"host": "localhost:8790"}).status_code == 200


def test_corrections_are_the_library_s_recorded_with_who(client: TestClient, warehouse: Path) -> None:
    with Warehouse(warehouse) as wh:
        into, other = wh.con.execute(
            """SELECT a.id, b.id FROM clusters a JOIN clusters b ON a.service = b.service AND a.view = b.view
               AND a.polarity = b.polarity AND a.id < b.id
               WHERE a.status = 'open' AND b.status = 'open' AND a.view = 'reports' ORDER BY a.id, b.id LIMIT 1"""
        ).fetchone() or (0, 0)
    page = f"/clusters/{into}"
    assert f'<option value="{other}">' in client.get(page).text
    asked = _post(client, f"{page}/merge", page, other=str(other), reason="same bug", actor="mallory")
    assert asked.status_code == 200 and "What will change" in asked.text  # a confirmation, nothing done yet
    with Warehouse(warehouse) as wh:
        assert wh.con.execute("SELECT status FROM clusters WHERE id = ?", [other]).fetchall() == [("open",)]
    merged = _post(client, f"{page}/merge", page, other=str(other), reason="same bug", confirm="yes", actor="mallory")
    assert merged.status_code == 303 and merged.headers["location"] == page
    assert f"merged cluster {other} into {into}" in flash_of(client.get(page).text)
    assert client.get(f"/clusters/{other}", follow_redirects=False).headers["location"] == page
    members = re.findall(r'name="records" value="([^"]+)"', client.get(page).text)
    split = _post(client, f"{page}/split", page, records=members[:1], reason="different")
    assert split.status_code == 303
    new = int(split.headers["location"].rsplit("/", 1)[1])  # the new cluster's page follows a split
    assert f"into this new cluster {new}, named" in flash_of(client.get(f"/clusters/{new}").text)
    moved = _post(client, f"/clusters/{new}/move", f"/clusters/{new}", records=members[:1], to=str(into))
    assert moved.status_code == 303
    assert _post(client, f"{page}/ignore", page, reason="noise").status_code == 303
    again = _post(client, f"{page}/ignore", page)
    assert again.status_code == 409 and alert_of(again.text) == f"cluster {into} is already ignored"
    assert _post(client, f"{page}/unignore", page).status_code == 303
    with Warehouse(warehouse) as wh:
        actions = wh.con.execute(
            "SELECT action, actor, reason FROM cluster_actions WHERE cluster_id IN (?, ?) ORDER BY id", [into, new]
        ).fetchall()
    assert [a for a, _, _ in actions] == ["merge", "split", "move", "ignore", "unignore"]
    assert {actor for _, actor, _ in actions} == {REVIEWER}
    assert actions[0][2] == "same bug"
    history_html = client.get(page).text.split('id="cluster-history"')[1]
    assert f"{REVIEWER} merged cluster {other} into cluster {into} (" in history_html and "reports): same bug" in history_html
    bad = [(f"{page}/merge", {"other": "abc"}, "other: "), (f"{page}/split", {}, "records: tick at least one"),
           (f"{page}/move", {"records": members[:1]}, "to: ")]
    for url, fields, message in bad:
        response = _post(client, url, page, **fields)
        assert response.status_code == 400 and alert_of(response.text).startswith(message), alert_of(response.text)
    across = _post(client, f"{page}/merge", page, other=str(into))
    assert across.status_code == 409 and alert_of(across.text) == "a cluster cannot be merged into itself"


def test_the_demand_table_shows_this_week_last_week_and_all(client: TestClient, warehouse: Path) -> None:
    from feedback_insights.clusters import demand

    with Warehouse(warehouse) as wh:
        top = demand(wh).filter(status="open").row(0, named=True)
    html = client.get("/clusters").text
    row = html.split(f'<a href="/clusters/{top["cluster_id"]}">{top["cluster_id"]}</a>')[1].split("</tr>")[0]
    numbers = re.findall(r'<td class="num"[^>]*>([^<]+)</td>', row)
    assert numbers[:4] == [str(top["accounts_this_week"]), str(top["accounts_last_week"]), str(top["accounts"]),
                           str(top["reports"])]
    assert f"this week is {top['week']}" in html


def test_every_week_s_digest_is_browsable(client: TestClient) -> None:
    listed = client.get("/digests").text
    weeks = re.findall(r'<a href="/digests/(\d{4}-W\d\d)">', listed)
    assert "2026-W48" in weeks and weeks == sorted(weeks, reverse=True)
    for week in weeks:
        page = client.get(f"/digests/{week}")
        assert page.status_code == 200 and f"<title>Digest {week}" in page.text
    html = client.get("/digests/2026-W48/html")
    assert html.status_code == 200 and "2026-W48" in html.text
    policy = html.headers["content-security-policy"]
    assert "sandbox" in policy and "script-src" not in policy and "default-src 'none'" in policy


def test_a_busy_warehouse_is_a_retrying_page_not_a_failure(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    token = csrf_of(client.get(f"/drafts/{one}").text)
    with exclusive(warehouse, "the ingest flow"):
        page = client.get("/drafts?status=pending")
        posted = client.post(f"/drafts/{one}/approve", data={"csrf": token}, follow_redirects=False)
    assert page.status_code == 503 and page.headers["retry-after"] == "3"
    assert '<meta http-equiv="refresh" content="3; url=/drafts?status=pending">' in page.text
    assert "Busy, retrying" in page.text and "the ingest flow" in page.text
    assert posted.status_code == 503 and "Nothing was changed" in posted.text
    assert f"url=/drafts/{one}" in posted.text
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["status"] == "pending"
    assert client.get("/drafts").status_code == 200  # its turn, once the flow is done


def test_with_a_token_a_login_gives_an_http_only_strict_session(warehouse: Path) -> None:
    app = create_app(desk_config(warehouse), "0.0.0.0", TOKEN)
    with TestClient(app, base_url="http://desk.example") as client:
        gate = client.get("/drafts", follow_redirects=False)
        assert gate.status_code == 303 and gate.headers["location"] == "/login"
        login = client.get("/login")
        first = client.cookies["desk_session"]
        token = csrf_of(login.text)
        wrong = client.post("/login", data={"csrf": token, "name": "mallory", "token": TOKEN[:-1] + "x"})
        assert wrong.status_code == 403 and alert_of(wrong.text) == "wrong token"
        assert client.get("/drafts", follow_redirects=False).status_code == 303
        no_name = client.post("/login", data={"csrf": token, "name": " ", "token": TOKEN})
        assert no_name.status_code == 400 and alert_of(no_name.text).startswith("name: ")
        done = client.post("/login", data={"csrf": token, "name": "  Ana   Lima ", "token": TOKEN}, follow_redirects=False)
        assert done.status_code == 303
        cookie = done.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict") and "Path=/" in cookie
        assert client.cookies["desk_session"] != first  # a new session: no fixation
        one = pending(warehouse)[0]
        page = client.get(f"/drafts/{one}").text
        assert "reviewing as <strong>Ana Lima</strong>" in page
        approved = client.post(f"/drafts/{one}/approve", data={"csrf": csrf_of(page), "name": "mallory"},
                               follow_redirects=False)
        assert approved.status_code == 303
        with Warehouse(warehouse) as wh:
            assert get_draft(wh, one)["reviewed_by"] == "Ana Lima"
        assert client.post("/logout", data={"csrf": csrf_of(client.get("/drafts").text)}).status_code == 200
        assert client.get("/drafts", follow_redirects=False).headers["location"] == "/login"
    with TestClient(app, base_url="http://desk.example") as anonymous:
        refused = anonymous.post(f"/drafts/{pending(warehouse)[0]}/approve", data={"csrf": "x"})
        assert refused.status_code == 403


def test_it_refuses_to_listen_beyond_loopback_without_a_long_token(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = desk_config(warehouse, token_env="FI_DESK_TEST_TOKEN")
    monkeypatch.delenv("FI_DESK_TEST_TOKEN", raising=False)
    with pytest.raises(DeskRefused, match="set FI_DESK_TEST_TOKEN"):
        serve(config, "0.0.0.0", 1)
    monkeypatch.setenv("FI_DESK_TEST_TOKEN", "short")
    with pytest.raises(DeskRefused, match="at least 16"):
        serve(config, "192.168.1.10", 1)
    refused = run_cli("desk", "--host", "0.0.0.0", cwd=warehouse.parent,
                      env={k: v for k, v in os.environ.items() if k != "FEEDBACK_INSIGHTS_DESK_TOKEN"})
    assert refused.returncode == 2
    assert "set FEEDBACK_INSIGHTS_DESK_TOKEN" in refused.stderr and "Traceback" not in refused.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answer(url: str) -> httpx.Response:
    """``url``'s answer once the desk listens (it is announced just before)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url)
        except httpx.ConnectError:
            assert time.monotonic() < deadline, "the desk did not start"
            time.sleep(0.2)


def test_the_desk_command_serves_on_127_0_0_1(warehouse: Path) -> None:
    (warehouse.parent / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n[desk]\nreviewer = "rita"\n')
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "FEEDBACK_INSIGHTS_DESK_TOKEN"}
    server = subprocess.Popen([sys.executable, "-m", "feedback_insights", "desk", "--port", str(port)],
                              cwd=warehouse.parent, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        assert server.stderr.readline().strip() == f"desk: http://127.0.0.1:{port}/ (Ctrl-C stops it)"
        response = _answer(f"http://127.0.0.1:{port}/drafts")
        assert response.status_code == 200 and "reviewing as <strong>rita</strong>" in response.text
        assert "server" not in response.headers
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=20) == 0


def test_a_request_body_over_the_limit_is_refused_as_it_arrives(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    token = csrf_of(client.get(page).text)
    big = client.post(f"{page}/edit", data={"csrf": token, "title": "t", "body": "x" * 1_200_000})
    assert big.status_code == 413 and "over 1,000,000 bytes" in alert_of(big.text)

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked, as a client may send it
        yield f"csrf={token}&title=t&body=".encode()
        for _ in range(300):
            yield b"x" * 4096

    chunked = client.post(f"{page}/edit", content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"})
    assert chunked.status_code == 413
    form = {"content-type": "application/x-www-form-urlencoded"}
    latin = client.post(f"{page}/edit", content=f"csrf={token}&title=caf\xe9&body=x".encode("latin-1"), headers=form)
    assert latin.status_code == 400 and alert_of(latin.text) == "form: not UTF-8"
    multipart = client.post(f"{page}/edit", data={"csrf": token, "title": "t"}, files={"body": ("b.md", b"x")})
    assert multipart.status_code == 403  # no form the desk sends
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["title"] != "t"


def test_html_in_a_body_is_not_rendered(client: TestClient, warehouse: Path) -> None:
    """A maintainer's text is filed as written, but the desk renders it as GitHub renders an
    issue: raw HTML dropped, a javascript: link without its target, line breaks kept."""
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    body = ("Hello <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n[click](javascript:alert(1)) **bold**\n\n"
            "first line\nsecond line\n")
    assert _post(client, f"{page}/edit", page, title="t", body=body).status_code == 303
    html = client.get(page).text
    rendered = html.split('class="markdown-body">')[1].split("</article>")[0]
    assert "<strong>bold</strong>" in rendered
    assert "first line<br />" in rendered  # an issue's line break is a break (a README's is not)
    assert "<script" not in rendered and "<img" not in rendered and "javascript:" not in rendered
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # in the edit form, as text


def test_a_broken_warehouse_is_a_500_page_without_a_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "feedback.duckdb"
    broken.write_bytes(b"this is not a DuckDB file" * 100)
    app = create_app(desk_config(broken), "127.0.0.1", None)
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        response = client.get("/drafts")
    assert response.status_code == 500
    assert "Something went wrong" in response.text and "Traceback" not in response.text and "duckdb" not in response.text
    assert response.headers["content-security-policy"] == CSP


def test_a_cluster_without_a_draft_is_drafted_by_the_reviewer(client: TestClient, warehouse: Path) -> None:
    from feedback_insights.clusters import demand

    with Warehouse(warehouse) as wh:
        drafted = {c for (c,) in wh.con.execute("SELECT cluster_id FROM drafts").fetchall()}
        figures = demand(wh).filter(status="open", polarity="problem", view="reports")
        cluster_id = next(c for c in figures["cluster_id"] if c not in drafted)
    page = f"/clusters/{cluster_id}"
    assert "Draft an issue for this cluster" in client.get(page).text
    made = _post(client, f"{page}/draft", page)
    assert made.status_code == 303
    draft_id = int(made.headers["location"].rsplit("/", 1)[1])
    assert f"drafted cluster {cluster_id} as draft {draft_id}" in flash_of(client.get(made.headers["location"]).text)
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, draft_id)["cluster_id"] == cluster_id
        assert [(a["action"], a["actor"]) for a in history(wh, draft_id)][0][1] == REVIEWER
    assert "Draft an issue for this cluster" not in client.get(page).text
    again = _post(client, f"{page}/draft", f"/drafts/{draft_id}")
    assert again.status_code == 409 and alert_of(again.text).startswith(f"cluster {cluster_id} already has draft {draft_id}")


def test_a_flood_of_visitors_never_logs_a_reviewer_out() -> None:
    sessions = Sessions(lifetime_seconds=3600)
    reviewer = sessions.new(reviewer="Ana")
    first = sessions.new()
    for _ in range(MAX_SESSIONS + 5):
        sessions.new()
    assert sessions.get(reviewer.id) is reviewer
    again = sessions.get(first.id)  # a visitor's session is its id: none to push out
    assert again is not None and again.csrf == first.csrf and again.reviewer is None
    assert sessions.get(None) is None and sessions.get("made-up") is None
    expired = Sessions(lifetime_seconds=0.0)
    gone = expired.new(reviewer="Ana")
    time.sleep(0.01)
    assert expired.get(gone.id) is None


SEPARATOR = "--- body (markdown) below this line ---"


def test_a_field_holding_the_editor_s_separator_leaves_the_body_alone(client: TestClient, warehouse: Path) -> None:
    """The desk saves field by field: its form never goes through the editor's text form, where
    the first separator ended the fields and the rest (of a label, say) became the body."""
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    with Warehouse(warehouse) as wh:
        before = get_draft(wh, one)
    saved = _post(client, f"{page}/edit", page, title=before["title"], labels=f"agent-feedback, {SEPARATOR}",
                  workaround=SEPARATOR, body=before["body"])
    assert saved.status_code == 303, alert_of(saved.text)
    with Warehouse(warehouse) as wh:
        after = get_draft(wh, one)
    assert after["body"] == before["body"]
    assert after["labels"] == ["agent-feedback", SEPARATOR] and after["workaround"] == SEPARATOR


def test_save_edit_splits_at_the_separator_line_and_checks_every_field(warehouse: Path) -> None:
    """``drafts edit`` saves through the same checks as the desk (labels, title, control
    characters), each refusal naming its field; a field that merely contains the separator is
    no separator."""
    one = pending(warehouse)[0]
    with Warehouse(warehouse) as wh:
        before = get_draft(wh, one)
        form = edit_form(before).replace("labels: ", f"labels: {SEPARATOR}, ", 1)
        assert save_edit(wh, one, "maria", form) == ["labels"]
        after = get_draft(wh, one)
        assert after["body"] == before["body"] and after["labels"] == [SEPARATOR, *before["labels"]]
        text = edit_form(after)
        refused = [
            (text.replace(f"title: {after['title']}", "title: " + "t" * 257, 1), "title", "at most 256 characters"),
            (text.replace(f"title: {after['title']}", "title: \u202eevil", 1), "title", "U+202E"),
            (text.replace("labels: ", "labels: " + "a" * 51 + ", ", 1), "labels", "1 to 50 characters"),
            (text.replace("labels: ", "labels: " + ", ".join(f"l{n}" for n in range(21)) + ", ", 1), "labels", "at most 20"),
            (text.replace("workaround: ", "workaround: use\x00this", 1), "workaround", "U+0000"),
        ]
        for edited, field, message in refused:
            with pytest.raises(ReviewError, match=re.escape(message)) as caught:
                save_edit(wh, one, "maria", edited)
            assert caught.value.field == field and str(caught.value).startswith(f"{field}: ")
        with pytest.raises(ReviewError, match="title: one line of printable characters") as caught:
            save_fields(wh, one, "maria", {**after, "title": "two\u2028lines"})
        assert caught.value.field == "title"
        assert get_draft(wh, one)["title"] == after["title"]


def test_control_characters_in_one_line_fields_are_refused(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    with Warehouse(warehouse) as wh:
        before = get_draft(wh, one)
    for bad, code in [("a\x00b", "U+0000"), ("a\u202eb", "U+202E"), ("a\u2028b", "U+2028")]:
        for field in ("title", "workaround"):
            fields = {"title": "t", "body": "x", field: bad}
            response = _post(client, f"{page}/edit", page, **fields)
            assert response.status_code == 400, (field, bad)
            assert alert_of(response.text) == f"{field}: one line of printable characters (it has {code})"
        response = _post(client, f"{page}/reject", page, reason=bad)
        assert response.status_code == 400 and alert_of(response.text).startswith("reason: "), bad
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one) == before


def test_simultaneous_requests_take_turns_instead_of_saying_busy(warehouse: Path) -> None:
    """Threads of one desk wait for each other; only another process makes a page "busy"."""
    urls = ["/drafts", "/clusters", "/digests", "/drafts?status=pending", "/clusters?view=goals", "/drafts"] * 2
    with serving(create_app(desk_config(warehouse), "127.0.0.1", None)) as desk, httpx.Client(base_url=desk) as http:
        with ThreadPoolExecutor(len(urls)) as pool:
            statuses = list(pool.map(lambda url: http.get(url).status_code, urls))
    assert statuses == [200] * len(urls)


def test_create_app_refuses_another_address_without_a_token(warehouse: Path) -> None:
    config = desk_config(warehouse, token_env="FI_DESK_TEST_TOKEN")
    with pytest.raises(DeskRefused, match="--host 0.0.0.0 is reachable from other machines: set FI_DESK_TEST_TOKEN"):
        create_app(config, "0.0.0.0", None)
    with pytest.raises(DeskRefused, match="FI_DESK_TEST_TOKEN is 5 characters"):
        create_app(config, "192.168.1.10", "short")
    assert create_app(config, "::1", None) is not None  # loopback needs none


def _desk_folder(warehouse: Path) -> Path:
    (warehouse.parent / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n[desk]\nreviewer = "rita"\n')
    return warehouse.parent


def test_a_port_in_use_is_one_line_and_nothing_announced(warehouse: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "FEEDBACK_INSIGHTS_DESK_TOKEN"}
        refused = run_cli("desk", "--port", str(port), cwd=_desk_folder(warehouse), env=env)
    assert refused.returncode == 2  # a failure the user can fix
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0], refused.stderr
    assert "desk: http" not in refused.stderr and "Traceback" not in refused.stderr


def test_a_token_over_plain_http_is_warned_about(warehouse: Path) -> None:
    port = _free_port()
    env = {**os.environ, "FEEDBACK_INSIGHTS_DESK_TOKEN": TOKEN}
    server = subprocess.Popen([sys.executable, "-m", "feedback_insights", "desk", "--host", "0.0.0.0", "--port", str(port)],
                              cwd=_desk_folder(warehouse), env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        warning = server.stderr.readline().strip()
        assert warning.startswith("desk: warning: the desk serves plain HTTP on 0.0.0.0")
        assert "unencrypted" in warning and "TLS" in warning
        assert server.stderr.readline().strip() == f"desk: http://0.0.0.0:{port}/ (Ctrl-C stops it)"
        assert _answer(f"http://127.0.0.1:{port}/login").status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=20) == 0


def test_a_week_that_has_not_begun_is_a_404_page_saying_so(client: TestClient) -> None:
    for url in ("/digests/2099-W01", "/digests/2099-W01/html"):
        response = client.get(url)
        assert response.status_code == 404
        assert alert_of(response.text).startswith("2099-W01 has not begun; this week is "), response.text[-300:]


def test_a_digest_s_cards_link_to_the_desk_s_own_pages(client: TestClient) -> None:
    for url in ("/digests/2026-W48", "/digests/2026-W48/html"):
        html = client.get(url).text
        assert re.search(rf'href="{BASE}/(clusters|drafts)/\d+"', html), url


def _pair(warehouse: Path) -> tuple[int, int]:
    """Two open report clusters a merge may join (same service and polarity), each with a pending draft."""
    with Warehouse(warehouse) as wh:
        found = wh.con.execute(
            """SELECT a.id, b.id FROM clusters a JOIN clusters b ON a.service = b.service AND a.view = b.view
               AND a.polarity = b.polarity AND a.id < b.id
               JOIN drafts da ON da.cluster_id = a.id AND da.status = 'pending'
               JOIN drafts db ON db.cluster_id = b.id AND db.status = 'pending'
               WHERE a.status = 'open' AND b.status = 'open' AND a.view = 'reports' ORDER BY a.id, b.id LIMIT 1"""
        ).fetchone()
    assert found is not None
    return found


def test_a_merge_chooses_nothing_by_default_shows_the_figures_and_is_confirmed_then_undone(
        client: TestClient, warehouse: Path) -> None:
    into, other = _pair(warehouse)
    page = f"/clusters/{into}"
    html = client.get(page).text
    merge_form = html.split('action="/clusters/%d/merge"' % into)[1].split("</form>")[0]
    assert '<option value="" selected disabled>choose a cluster…</option>' in merge_form
    assert merge_form.count(" selected") == 1  # no cluster preselected
    with Warehouse(warehouse) as wh:
        reports, accounts = wh.con.execute(
            """SELECT count(*), count(DISTINCT r.account) FROM cluster_members m JOIN records r USING (collector, id)
               WHERE m.cluster_id = ?""", [other]).fetchone() or (0, 0)
        absorbed_draft = wh.con.execute("SELECT id FROM drafts WHERE cluster_id = ?", [other]).fetchone()[0]  # type: ignore[index]
    option = re.search(rf'<option value="{other}">([^<]+)</option>', merge_form)
    assert option is not None and f"{reports} reports, {accounts} accounts, open, draft pending" in option.group(1)
    unchosen = _post(client, f"{page}/merge", page, other="")
    assert unchosen.status_code == 400 and alert_of(unchosen.text) == "other: choose the cluster to merge into this one"

    asked = _post(client, f"{page}/merge", page, other=str(other), reason="same bug")
    changes = asked.text.split('id="changes"')[1].split("</ul>")[0]
    assert f"draft {absorbed_draft} (pending) is superseded by draft" in changes and "will never be filed" in changes
    assert f"join cluster {into}, which keeps its name" in changes
    with Warehouse(warehouse) as wh:
        assert wh.con.execute("SELECT status FROM clusters WHERE id = ?", [other]).fetchall() == [("open",)]
    done = _post(client, f"{page}/merge", page, other=str(other), reason="same bug", confirm="yes")
    assert done.status_code == 303
    after = client.get(page).text
    undo = re.search(r'name="action" value="(\d+)"', after.split('id="cluster-history"')[1])
    assert undo is not None
    undone = _post(client, f"{page}/undo", page, action=undo.group(1), reason="two problems after all")
    assert undone.status_code == 303 and f"undid correction #{undo.group(1)}" in flash_of(client.get(page).text)
    with Warehouse(warehouse) as wh:
        assert wh.con.execute("SELECT status FROM clusters WHERE id = ?", [other]).fetchall() == [("open",)]
        assert wh.con.execute("SELECT status FROM drafts WHERE id = ?", [absorbed_draft]).fetchall() == [("pending",)]
        assert wh.con.execute("SELECT actor FROM cluster_actions WHERE action = 'undo'").fetchall() == [(REVIEWER,)]
    history_html = client.get(page).text.split('id="cluster-history"')[1]
    assert f"{REVIEWER} undid correction #{undo.group(1)}" in history_html and "undone by #" in history_html
    twice = _post(client, f"{page}/undo", page, action=undo.group(1))
    assert twice.status_code == 409 and "already undone" in alert_of(twice.text)


def test_a_split_s_new_cluster_is_linked_named_offered_a_draft_and_renamed(client: TestClient, warehouse: Path) -> None:
    into, _ = _pair(warehouse)
    page = f"/clusters/{into}"
    members = re.findall(r'name="records" value="([^"]+)"', client.get(page).text)
    split = _post(client, f"{page}/split", page, records=members[:2])
    new = int(split.headers["location"].rsplit("/", 1)[1])
    html = client.get(f"/clusters/{new}").text
    flash = html.split('class="flash"')[1].split("</div>")[0]
    assert f'<a href="/clusters/{new}">cluster {new}</a>' in flash and "named \u201c" in flash
    assert "Draft an issue for this cluster" in html
    renamed = _post(client, f"/clusters/{new}/rename", f"/clusters/{new}", name="orbit: the second problem")
    assert renamed.status_code == 303
    shown = client.get(f"/clusters/{new}").text
    assert "<h1>orbit: the second problem</h1>" in shown and "named by a maintainer" in shown
    with Warehouse(warehouse) as wh:
        assert wh.con.execute("SELECT given_name, label FROM clusters WHERE id = ?", [new]).fetchall() == [
            ("orbit: the second problem", "orbit: the second problem")]


def test_a_blank_reject_reason_shows_the_form_again_and_history_is_sentences(client: TestClient, warehouse: Path) -> None:
    one = pending(warehouse)[0]
    page = f"/drafts/{one}"
    blank = _post(client, f"{page}/reject", page, reason="  ")
    assert blank.status_code == 400 and "Cannot do that" not in blank.text
    assert 'id="reason" name="reason"' in blank.text and 'aria-invalid="true"' in blank.text
    assert alert_of(blank.text) == "reason: say why you reject it; the next maintainer reads it"
    assert _post(client, f"{page}/reject", page, reason="not a bug").status_code == 303
    history_html = client.get(page).text.split('id="history"')[1].split("</section>")[0]
    assert f"{REVIEWER} rejected it: not a bug" in history_html
    assert "the pipeline drafted it from" in history_html and "by the template" in history_html
    assert "{" not in history_html and "&#34;" not in history_html  # no JSON


def test_a_shared_account_is_never_the_reviewer(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEEDBACK_INSIGHTS_USER", "root")
    with pytest.raises(ValueError, match="shared account"):
        DeskConfig(reviewer="root")
    app = create_app(embedded_default(warehouse), "127.0.0.1", None)
    with TestClient(app, base_url=BASE) as browser:
        first = browser.get("/drafts", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/login"
        form = browser.get("/login").text
        assert "Who is reviewing?" in form and 'name="token"' not in form
        refused = browser.post("/login", data={"csrf": csrf_of(form), "name": "root"})
        assert refused.status_code == 400 and "shared account" in alert_of(refused.text)
        browser.post("/login", data={"csrf": csrf_of(browser.get("/login").text), "name": "Ana Lima"})
        one = pending(warehouse)[0]
        assert _post(browser, f"/drafts/{one}/approve", f"/drafts/{one}").status_code == 303
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["reviewed_by"] == "Ana Lima"


def test_a_cluster_page_shows_the_turn_an_in_session_report_is_about(client: TestClient, warehouse: Path) -> None:
    with Warehouse(warehouse) as wh:
        cluster_id, text = wh.con.execute(
            """SELECT m.cluster_id, json_extract_string(r.evidence, 'target_text') FROM records r
               JOIN cluster_members m USING (collector, id) JOIN clusters c ON c.id = m.cluster_id
               WHERE m.view = 'reports' AND c.status = 'open' AND json_extract_string(r.evidence, 'target_text') <> ''
               ORDER BY m.cluster_id LIMIT 1""").fetchone() or (0, "")
    html = client.get(f"/clusters/{cluster_id}").text
    turns = html.split('class="turn"')
    assert len(turns) > 1 and "message it is about" in turns[1]
    words = " ".join(text.split())[:40]
    assert words.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;").replace("'", "&#39;") \
        in " ".join(html.split())
