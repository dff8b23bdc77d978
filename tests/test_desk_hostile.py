"""The review desk under abuse: stalled and slow connections and a descriptor limit (served by
uvicorn as ``feedback-insights desk`` serves it), ids that are not plain numbers, actions on
reports the cluster in the URL does not own, and a flood of cookieless requests, which any web
page can send to a desk on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from feedback_insights.desk import create_app
from feedback_insights.warehouse import Warehouse

from .test_collector_hostile import read_until_closed, stalled
from .test_desk import (
    BASE,
    _desk_folder,
    _free_port,
    _routes,
    alert_of,
    csrf_of,
    desk_config,
    drafted_copy,
    flash_of,
    pending,
    serving,
)

#: What an id field or segment must refuse: digits of other scripts ("²".isdigit() is True),
#: signs, separators int() accepts, overflowing numbers, nothing at all.
BAD_IDS = ["²", "٣", "１２", "-1", "0", "", " 5", "5 ", "+5", "5_0", "5.0", "1e3", "0x1f", "9" * 40, str(2**31)]
#: Values every field of every form, query and path is probed with.
HOSTILE = ["²", "-1", "", " 5", "9" * 40, "\x00\u202e", "a" * 5000, "../%"]


@pytest.fixture(scope="module")
def shared(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A drafted sample for the tests that change nothing (or must change nothing)."""
    return drafted_copy(clustered_sample, tmp_path_factory.mktemp("desk-hostile"))


@pytest.fixture(scope="module")
def client(shared: Path) -> Iterator[TestClient]:
    with TestClient(create_app(desk_config(shared), "127.0.0.1", None, lock_wait=0.3), base_url=BASE) as c:
        yield c


def actions(path: Path) -> list[tuple]:
    with Warehouse(path) as wh:
        return wh.con.execute("SELECT * FROM cluster_actions ORDER BY id").fetchall()


def members(path: Path) -> list[tuple]:
    with Warehouse(path) as wh:
        return wh.con.execute("SELECT * FROM cluster_members ORDER BY ALL").fetchall()


#: The CSRF token of each session cookie the tests have used (fetching a page per post is slow).
_TOKENS: dict[str | None, str] = {}


def post(client: TestClient, url: str, fields: list[tuple[str, str]]) -> httpx.Response:
    """``fields`` posted with the CSRF token of the client's session (repeated names kept)."""
    if client.cookies.get("desk_session") not in _TOKENS:
        draft = re.search(r'href="(/drafts/\d+)"', client.get("/drafts").text)
        assert draft, "the queue lists no draft"
        _TOKENS[client.cookies.get("desk_session")] = csrf_of(client.get(draft.group(1)).text)
    token = _TOKENS[client.cookies.get("desk_session")]
    body = "&".join(f"{quote(k)}={quote(v)}" for k, v in [("csrf", token), *fields])
    return client.post(url, content=body, headers={"content-type": "application/x-www-form-urlencoded"},
                       follow_redirects=False)


def two_clusters(path: Path) -> tuple[int, int, str]:
    """Two open clusters of one view and service, the second with a member to move or split."""
    with Warehouse(path) as wh:
        found = wh.con.execute(
            """SELECT a.id, b.id, min(m.collector || ':' || m.id) FROM clusters a
               JOIN clusters b ON a.service = b.service AND a.view = b.view AND a.id <> b.id
               JOIN cluster_members m ON m.cluster_id = b.id
               WHERE a.status = 'open' AND b.status = 'open' AND a.view = 'reports'
               GROUP BY a.id, b.id HAVING count(*) >= 2 ORDER BY a.id, b.id LIMIT 1"""
        ).fetchone()
    assert found, "the sample has no two clusters of one service"
    return found


# -- ids ------------------------------------------------------------------------------------


def test_ids_in_forms_and_paths_are_ascii_digits_or_a_400_naming_the_field(client: TestClient, shared: Path) -> None:
    into, other, member = two_clusters(shared)
    before = (actions(shared), members(shared))
    page = f"/clusters/{into}"
    for bad in BAD_IDS:
        merged = post(client, f"{page}/merge", [("other", bad)])
        assert merged.status_code == 400 and alert_of(merged.text).startswith("other: "), (bad, merged.status_code)
        moved = post(client, f"/clusters/{other}/move", [("records", member), ("to", bad)])
        assert moved.status_code == 400 and alert_of(moved.text).startswith("to: "), (bad, moved.status_code)
    twice = post(client, f"{page}/merge", [("other", str(other)), ("other", str(into))])
    assert twice.status_code == 400 and alert_of(twice.text) == "other: give one value (it was given 2 times)"
    for bad in [b for b in BAD_IDS if b.strip()]:
        for url in (f"/clusters/{quote(bad)}", f"/drafts/{quote(bad)}"):
            response = client.get(url)  # a page that cannot exist: one plain sentence
            assert response.status_code == 404, (url, response.status_code)
            assert re.match(r"There is no (cluster|draft) \u201c", alert_of(response.text)), (url, alert_of(response.text))
        response = post(client, f"/clusters/{quote(bad)}/ignore", [])
        assert response.status_code == 400 and alert_of(response.text).startswith("cluster_id: "), bad
    for week in ("٢٠٢٦-W٤٨", "2026-W٤٨", "2026-W48%0A"):
        response = client.get(f"/digests/{week}")
        assert response.status_code == 400 and alert_of(response.text).startswith("week: "), week
    assert (actions(shared), members(shared)) == before


def test_no_route_answers_500_to_any_hostile_value_in_any_field(
        clustered_sample: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    warehouse = drafted_copy(clustered_sample, tmp_path)
    one, (into, other, member) = pending(warehouse)[0], two_clusters(warehouse)
    fields = ["other", "to", "records", "reason", "title", "labels", "workaround", "body", "name", "token"]
    with TestClient(create_app(desk_config(warehouse), "127.0.0.1", None, lock_wait=0.3), base_url=BASE) as http:
        for route in _routes(list(http.app.routes)):
            path = route.path.replace("{draft_id}", str(one)).replace("{cluster_id}", str(into))
            path = path.replace("{week}", "2026-W48")
            for value in HOSTILE:
                if "POST" in route.methods:
                    answers = [post(http, path, [(name, value) for name in fields]),
                               post(http, path, [(name, v) for name in fields for v in (value, member, str(other))])]
                elif queries := [param.name for param in route.dependant.query_params]:
                    answers = [http.get(path, params=dict.fromkeys(queries, value), follow_redirects=False)]
                else:
                    answers = []
                for segment in ("{draft_id}", "{cluster_id}", "{week}"):
                    if segment in route.path and value:
                        hostile = route.path.replace(segment, quote(value, safe=""))
                        hostile = hostile.replace("{draft_id}", str(one)).replace("{cluster_id}", str(into))
                        answers.append(post(http, hostile, []) if "POST" in route.methods else http.get(hostile))
                for answer in answers:
                    assert answer.status_code < 500, (route.path, value[:20], answer.status_code, answer.text[-300:])
                    assert "Traceback" not in answer.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- records the URL's cluster does not own -------------------------------------------------


def test_a_move_or_split_names_only_reports_of_the_cluster_in_the_url(client: TestClient, shared: Path) -> None:
    into, other, member = two_clusters(shared)  # member is other's, not into's
    with Warehouse(shared) as wh:
        (own,) = wh.con.execute("SELECT min(collector || ':' || id) FROM cluster_members WHERE cluster_id = ?",
                                [into]).fetchone() or ("",)
    before = (actions(shared), members(shared))
    moved = post(client, f"/clusters/{into}/move", [("records", member), ("to", str(into))])
    assert moved.status_code == 409
    assert alert_of(moved.text) == f"{member} is not a member of cluster {into}: nothing was moved"
    shown = post(client, f"/clusters/{into}/move", [("records", own), ("records", member), ("to", str(other))])
    assert shown.status_code == 409 and alert_of(shown.text).startswith(f"{member} is not a member of cluster {into}")
    bare = post(client, f"/clusters/{into}/move", [("records", member.split(":", 1)[1]), ("to", str(other))])
    assert bare.status_code == 409 and "is not a member of cluster" in alert_of(bare.text)
    split = post(client, f"/clusters/{into}/split", [("records", member)])
    assert split.status_code == 409 and alert_of(split.text) == f"{member} is not a member of cluster {into}"
    assert (actions(shared), members(shared)) == before


# -- sessions -------------------------------------------------------------------------------


def test_cookieless_requests_cannot_end_a_reviewer_s_session(clustered_sample: Path, tmp_path: Path) -> None:
    """Without a token, as on 127.0.0.1: every request names a loopback host, so a page on
    any site can send them (logins, made with the token, are kept apart from visitors)."""
    warehouse = drafted_copy(clustered_sample, tmp_path)
    one = pending(warehouse)[0]
    app = create_app(desk_config(warehouse), "127.0.0.1", None)
    with TestClient(app, base_url=BASE) as reviewer:
        form = csrf_of(reviewer.get(f"/drafts/{one}").text)
        assert asyncio.run(strangers(app, 2_100)) == {303, 403}
        rejected = reviewer.post(f"/drafts/{one}/reject", data={"csrf": form, "reason": "not a bug"},
                                 follow_redirects=False)
        assert rejected.status_code == 303, alert_of(rejected.text)
        assert f"rejected draft {one}" in flash_of(reviewer.get(f"/drafts/{one}").text)  # its note, shown once
    with Warehouse(warehouse) as wh:
        assert wh.con.execute("SELECT status FROM drafts WHERE id = ?", [one]).fetchone() == ("rejected",)


async def strangers(app: FastAPI, count: int) -> set[int]:
    """``count`` requests as web pages send them to the desk: without its cookie (half of them
    GETs, half POSTs with a made-up CSRF token); the statuses they got. On the app's ASGI
    interface, in one event loop: a thread hand-off per request would take most of the time."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        statuses = set()
        for n in range(count):
            http.cookies.clear()
            answer = await (http.get("/login") if n % 2 else http.post("/logout", data={"csrf": "x"}))
            statuses.add(answer.status_code)
    return statuses


# -- slow and stalled connections -----------------------------------------------------------


@pytest.fixture(scope="module")
def slow(shared: Path) -> Iterator[str]:
    """The desk served as ``feedback-insights desk`` serves it, with short deadlines and a cap
    of 8 connections."""
    config = desk_config(shared, header_timeout=1.0, body_timeout=1.0, max_connections=8)
    with serving(create_app(config, "127.0.0.1", None)) as url:
        yield url


@contextmanager
def closing(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def test_stalled_heads_get_408_at_the_header_deadline_and_real_requests_are_answered(slow: str) -> None:
    opened = time.monotonic()
    with closing(stalled(slow, 4, b"GET /drafts HTTP/1.1\r\nHost: localhost\r\nAccept: te") + stalled(slow, 2, b"")) as socks:
        assert httpx.get(f"{slow}/drafts").status_code == 200
        answers = [read_until_closed(sock, opened + 1.0 + 1.5) for sock in socks]
    assert None not in answers, f"{answers.count(None)} of {len(answers)} stalled sockets still open"
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers if a)


def test_a_body_shorter_than_its_content_length_gets_408_at_the_body_deadline(
        slow: str, shared: Path, caplog: pytest.LogCaptureFixture) -> None:
    one = pending(shared)[0]
    with httpx.Client(base_url=slow) as http:
        page = http.get(f"/drafts/{one}")
    head = (f"POST /drafts/{one}/reject HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded"
            f"\r\nCookie: desk_session={page.cookies['desk_session']}\r\nContent-Length: 500\r\n\r\n").encode()
    sent = time.monotonic()
    with closing(stalled(slow, 1, head + f"csrf={csrf_of(page.text)}&reason=sl".encode())) as (sock,):
        answer = read_until_closed(sock, sent + 1.0 + 1.5)
    assert answer is not None and answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"did not arrive in time" in answer
    assert pending(shared)[0] == one
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_request_heads_are_limited_in_size(slow: str) -> None:
    with closing(stalled(slow, 1, b"GET /drafts HTTP/1.1\r\nHost: localhost\r\n")) as (sock,):
        try:
            for _ in range(100):  # 100 KiB of headers, and never an end to them
                sock.sendall(b"X-Pad: " + b"a" * 1017 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_until_closed(sock, time.monotonic() + 2)
    assert answer is not None and answer.startswith(b"HTTP/1.1 431 ")


def test_with_every_connection_busy_one_more_gets_503(slow: str, shared: Path) -> None:
    one = pending(shared)[0]
    head = (f"POST /drafts/{one}/reject HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded"
            "\r\nContent-Length: 500\r\n\r\ncsrf=").encode()
    with closing(stalled(slow, 8, head)) as busy:  # each sending its body: not to be cut off for another
        time.sleep(0.1)
        with closing(stalled(slow, 1, b"")) as (extra,):
            refused = read_until_closed(extra, time.monotonic() + 0.8)
        assert refused is not None and refused.startswith(b"HTTP/1.1 503 ") and b"\r\nretry-after: 5" in refused
        assert [read_until_closed(sock, time.monotonic() + 0.05) for sock in busy] == [None] * 8


def test_under_ulimit_n_256_three_hundred_stalled_sockets_starve_no_real_request(shared: Path) -> None:
    """The desk command itself, as the issue found it: 300 stalled sockets against 256
    descriptors. The cap is fitted to the limit (and said so), the longest-stalled connection
    makes room for each new one, and every real request is answered at once."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "FEEDBACK_INSIGHTS_DESK_TOKEN"}
    command = ["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', sys.executable, "-m", "feedback_insights", "desk",
               "--port", str(port)]
    desk = subprocess.Popen(command, cwd=_desk_folder(shared), env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = announced(desk)
        assert lines[-1] == f"desk: http://127.0.0.1:{port}/ (Ctrl-C stops it)"
        url = f"http://127.0.0.1:{port}"
        with closing(stalled(url, 300, b"GET /drafts HTTP/1.1\r\nHost: 127.0.0.1\r\n")):
            statuses = [httpx.get(f"{url}/static/desk.css", timeout=5).status_code for _ in range(39)]
        assert statuses == [200] * 39
        assert lines[0].startswith("desk: warning: max_connections lowered to 192: the descriptor limit"), lines
    finally:
        desk.send_signal(signal.SIGINT)
        assert desk.wait(timeout=20) == 0


def announced(desk: subprocess.Popen[str], timeout: float = 60) -> list[str]:
    """What the desk printed up to the line with its address (read in a thread: a desk that
    never prints it fails the test instead of hanging it)."""
    lines: queue.Queue[str] = queue.Queue()
    assert desk.stderr is not None
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in desk.stderr or ()], daemon=True).start()
    seen: list[str] = []
    while not seen or not seen[-1].startswith("desk: http"):
        try:
            seen.append(lines.get(timeout=timeout))
        except queue.Empty:
            raise AssertionError(f"the desk did not announce its address: {seen}") from None
    return seen
