"""The collector under hostile input, over real HTTP on 127.0.0.1: bad input is answered 4xx in
the AFP error shape (never 5xx), slow clients cannot hold connections, and nothing an agent
wrote reaches the log."""

from __future__ import annotations

import json
import logging
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, given

from .collector_server import AGENT_KEY, INGEST_KEY, PIPELINE_KEY, RunningCollector, running_collector
from .test_collector import SUBMISSION
from .test_dialects import AFS_SNAKE, SEP_PARAMS

LINK = '</feedback>; rel="agent-feedback"'
PIPE = {"authorization": f"Bearer {PIPELINE_KEY}"}
INGEST = {"authorization": f"Bearer {INGEST_KEY}"}
#: A key an agent wrote: it may come back in an answer (the agent sent it), never in the log.
AGENT_WORDS = "agentwrote_k3y"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningCollector]:
    with running_collector(tmp_path) as running:
        yield running


def post(server: RunningCollector, path: str, body: Any, content_type: str = "application/json",
         **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.url + path, content=content, headers={"content-type": content_type, **headers})


def nested(levels: int, leaf: Any = 1) -> Any:
    """``levels`` objects inside each other under the agent's own key."""
    node = leaf
    for _ in range(levels):
        node = {AGENT_WORDS: node}
    return node


def collector_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("feedback_insights.collector")]


# -- nesting --------------------------------------------------------------------------------


def test_a_small_body_nested_hundreds_deep_is_400_with_the_path_and_one_log_line(
        server: RunningCollector, caplog: pytest.LogCaptureFixture) -> None:
    body = b'{"type":"bug","goal":"g","message":"m","metadata":{"x":' + b"[" * 252 + b"]" * 252 + b"}}"
    assert len(body) < 600
    with caplog.at_level(logging.INFO):
        answer = post(server, "/feedback", body)
    assert answer.status_code == 400 and "retry-after" not in answer.headers
    error = answer.json()["error"]
    assert error["code"] == "invalid_feedback"
    assert error["details"][0]["path"].startswith("metadata.x.0.0.0")
    assert "64" in error["details"][0]["message"]
    lines = collector_lines(caplog)
    assert len(lines) == 1 and lines[0].exc_info is None and "Traceback" not in caplog.text
    assert json.loads(lines[0].getMessage())["status"] == 400


def test_every_agent_route_refuses_too_deep_bodies_before_validating_them(
        server: RunningCollector, caplog: pytest.LogCaptureFixture) -> None:
    too_deep = nested(70)
    with caplog.at_level(logging.INFO):
        afp = post(server, "/feedback", {**SUBMISSION, "metadata": too_deep})
        afs = post(server, "/api/v1/feedback", {**AFS_SNAKE, "metadata": too_deep})
        sep = post(server, "/api/mcp/feedback", {**SEP_PARAMS, "rollupMetrics": too_deep})
        rpc = post(server, "/api/mcp/feedback", {"jsonrpc": "2.0", "id": 7, "method": "feedback/submit",
                                                 "params": {**SEP_PARAMS, "rollupMetrics": too_deep}})
    for answer, field in ((afp, "metadata"), (afs, "metadata"), (sep, "rollupMetrics")):
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_feedback"
        assert error["details"] == [{"path": f"{field}." + ".".join([AGENT_WORDS] * 63),
                                     "message": "nests deeper than 64 levels"}]
    assert rpc.status_code == 400 and rpc.json()["id"] == 7 and rpc.json()["error"]["code"] == -32602
    assert rpc.json()["error"]["data"]["details"][0]["path"].startswith(f"params.rollupMetrics.{AGENT_WORDS}")
    # Exactly as deep as allowed is fine.
    assert post(server, "/feedback", {**SUBMISSION, "metadata": nested(63)}).status_code == 202
    assert AGENT_WORDS not in caplog.text


def test_a_too_deep_record_is_rejected_alone_and_a_too_deep_batch_is_400(server: RunningCollector) -> None:
    record = {"id": "fb_deep_ok", "received_at": "2026-11-02T10:00:00Z", "feedback": SUBMISSION}
    deep = {**record, "id": "fb_deep", "feedback": {**SUBMISSION, "metadata": nested(70)}}
    answer = post(server, "/v1/records", {"records": [record, deep]}, **INGEST)
    assert answer.status_code == 200
    ok, rejected = answer.json()["results"]
    assert ok["status"] == "accepted"
    assert rejected["status"] == "rejected" and rejected["id"] == "fb_deep"
    assert rejected["error"]["details"][0]["path"].startswith(f"feedback.metadata.{AGENT_WORDS}")
    whole = post(server, "/v1/records", {"records": [record], "x": nested(70)}, **INGEST)
    assert whole.status_code == 400 and whole.json()["error"]["code"] == "invalid_request"
    assert whole.json()["error"]["details"][0]["path"].startswith(f"x.{AGENT_WORDS}")
    assert whole.json()["error"]["details"][0]["message"] == "nests deeper than 64 levels"


def test_a_too_deep_known_issue_is_400_with_the_path(server: RunningCollector) -> None:
    issue = {"id": "iss_deep", "title": "t", "status": "planned", "match": {"fingerprints": [nested(70)]}}
    answer = httpx.put(server.url + "/v1/known-issues/iss_deep", json=issue, headers=PIPE)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"
    assert answer.json()["error"]["details"] == [{"path": "match.fingerprints.0." + ".".join([AGENT_WORDS] * 61),
                                                   "message": "nests deeper than 64 levels"}]


def test_a_server_fault_answers_503_and_logs_one_line_without_a_traceback_or_content(
        server: RunningCollector, caplog: pytest.LogCaptureFixture) -> None:
    server.collector.store.con.close()  # a genuine fault: the database goes away
    with caplog.at_level(logging.INFO):
        answer = post(server, "/feedback", {**SUBMISSION, "message": f"private {AGENT_WORDS}"})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert answer.headers["link"] == LINK
    lines = collector_lines(caplog)
    assert len(lines) == 1 and lines[0].exc_info is None and lines[0].levelno == logging.ERROR
    line = json.loads(lines[0].getMessage())
    assert line["status"] == 503 and line["error"] == "ProgrammingError"
    assert line["where"].startswith("feedback_insights.collector._store:")
    assert "Traceback" not in caplog.text and AGENT_WORDS not in caplog.text


# -- slow clients ---------------------------------------------------------------------------


def stalled(url: str, count: int, sent: bytes) -> list[socket.socket]:
    """``count`` connections to the server at ``url`` that send ``sent`` and then nothing more."""
    address = httpx.URL(url)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((address.host, address.port), timeout=5)
        sock.sendall(sent)
        sockets.append(sock)
    return sockets


def read_until_closed(sock: socket.socket, deadline: float) -> bytes | None:
    """What the server sent before it closed the connection, or None if it was still open at
    ``deadline`` (a ``time.monotonic()`` value)."""
    received = b""
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def closings(sockets: list[socket.socket], deadline: float) -> list[tuple[bytes, float] | None]:
    """For each socket, what the server sent before it closed the connection and when the first
    of it arrived (``time.monotonic()``; when it closed, if it sent nothing), or None if it was
    still open at ``deadline``. All are watched at once, so each time is within a poll of the
    server's answer (a slow machine only makes it later)."""
    received: dict[socket.socket, bytes] = {sock: b"" for sock in sockets}
    first: dict[socket.socket, float] = {}
    done: dict[socket.socket, tuple[bytes, float]] = {}
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ, data=sock)
        while len(done) < len(sockets) and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(timeout=left):
                sock = key.data
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                first.setdefault(sock, time.monotonic())
                received[sock] += chunk
                if not chunk:
                    done[sock] = (received[sock], first[sock])
                    selector.unregister(sock)
    return [done.get(sock) for sock in sockets]


def afp_408(answer: bytes) -> dict[str, Any]:
    """The head and JSON body of one whole HTTP 408 in the collector's error shape, closing."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *fields = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (f.partition(": ") for f in fields)}
    assert status == "HTTP/1.1 408 Request Timeout", answer
    assert headers["content-type"] == "application/json" and int(headers["content-length"]) == len(body), answer
    assert headers["connection"] == "close" and headers["link"] == LINK, answer
    return json.loads(body)


def test_stalled_headers_are_closed_within_the_header_timeout_and_real_requests_still_answered(
        tmp_path: Path) -> None:
    with running_collector(tmp_path, header_timeout=1.0) as server:
        opened = time.monotonic()
        sockets = stalled(server.url, 60, b"POST /feedback HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
        sockets += stalled(server.url, 20, b"")  # connected, nothing sent
        last_opened = time.monotonic()
        started = time.monotonic()
        answer = post(server, "/feedback", SUBMISSION)
        assert answer.status_code == 202 and time.monotonic() - started < 2
        deadline = last_opened + 1.0 + 2.0
        answers = closings(sockets, deadline)
        assert None not in answers, f"{answers.count(None)} of {len(sockets)} stalled sockets still open"
        # Each one answered once, whole, in the AFP error shape; none before its timeout was up.
        for received, at in filter(None, answers):
            assert afp_408(received) == {"error": {"code": "request_timeout",
                                                   "message": "The request did not arrive in time"}}
            assert at >= opened + 1.0, f"answered {at - opened:.2f} s after connecting: before the header timeout"
        for sock in sockets:
            sock.close()


def test_headers_trickled_byte_by_byte_are_cut_off_at_the_header_timeout(tmp_path: Path) -> None:
    with running_collector(tmp_path, header_timeout=1.0) as server:
        (sock,) = stalled(server.url, 1, b"GET /v1/known-issues HTTP/1.1\r\n")
        opened, closed = time.monotonic(), False
        while time.monotonic() - opened < 4:
            try:
                sock.sendall(b"X-Slow: y\r\n")  # a full header line every 0.2 s: never idle
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            sock.settimeout(0.2)
            try:
                if sock.recv(65536) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except ConnectionResetError:
                closed = True
                break
        assert closed and time.monotonic() - opened < 2.5
        sock.close()


def test_a_stalled_body_is_closed_within_the_body_timeout(tmp_path: Path) -> None:
    with running_collector(tmp_path, body_timeout=1.0) as server:
        head = b"POST /feedback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
        (sock,) = stalled(server.url, 1, head + b'{"type": "bug"')
        answer = read_until_closed(sock, time.monotonic() + 3.0)
        assert answer is not None and answer.startswith(b"HTTP/1.1 408 ")
        sock.close()
        assert post(server, "/feedback", SUBMISSION).status_code == 202


def test_over_the_connection_limit_the_longest_stalled_connection_makes_room(tmp_path: Path) -> None:
    with running_collector(tmp_path, max_connections=8, header_timeout=30.0) as server:
        oldest = stalled(server.url, 1, b"GET / HTTP/1.1\r\n")
        time.sleep(0.05)
        sockets = stalled(server.url, 7, b"GET / HTTP/1.1\r\n")
        started = time.monotonic()
        assert post(server, "/feedback", SUBMISSION).status_code == 202  # long before any timeout
        assert time.monotonic() - started < 2
        evicted = read_until_closed(oldest[0], time.monotonic() + 1)
        assert evicted is not None and evicted.startswith(b"HTTP/1.1 408 ")
        assert [read_until_closed(sock, time.monotonic() + 0.1) for sock in sockets] == [None] * 7  # still open
        for sock in [*oldest, *sockets]:
            sock.close()


def test_over_the_connection_limit_with_every_connection_busy_a_new_one_gets_503(tmp_path: Path) -> None:
    head = b"POST /feedback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"
    with running_collector(tmp_path, max_connections=4, body_timeout=30.0) as server:
        sockets = stalled(server.url, 4, head)  # each sending its body: busy, not to be cut off
        time.sleep(0.1)
        (extra,) = stalled(server.url, 1, b"")
        refused = read_until_closed(extra, time.monotonic() + 1)
        assert refused is not None and refused.startswith(b"HTTP/1.1 503 ")
        head_lines, _, body = refused.partition(b"\r\n\r\n")
        assert b"\r\nretry-after: 5" in head_lines and LINK.encode() in head_lines
        assert json.loads(body)["error"]["code"] == "unavailable"
        assert [read_until_closed(sock, time.monotonic() + 0.1) for sock in sockets] == [None] * 4
        for sock in [*sockets, extra]:
            sock.close()


def test_request_headers_are_limited_in_size(tmp_path: Path) -> None:
    with running_collector(tmp_path) as server:
        (sock,) = stalled(server.url, 1, b"GET /v1/known-issues HTTP/1.1\r\n")
        try:
            for _ in range(200):  # 200 KiB of headers, and never an end to them
                sock.sendall(b"X-Pad: " + b"a" * 1017 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_until_closed(sock, time.monotonic() + 2)
        assert answer is not None and answer.startswith(b"HTTP/1.1 431 ")
        sock.close()


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout(tmp_path: Path) -> None:
    with running_collector(tmp_path, keep_alive_timeout=1) as server:
        (sock,) = stalled(server.url, 1, b"GET /.well-known/agent-feedback HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(2)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        assert read_until_closed(sock, started + 3) == b"" and time.monotonic() - started < 2
        sock.close()


def test_bytes_that_are_not_http_are_answered_400_in_the_afp_shape(server: RunningCollector) -> None:
    (sock,) = stalled(server.url, 1, b"NOT HTTP AT ALL\r\n\r\n")
    answer = read_until_closed(sock, time.monotonic() + 2)
    sock.close()
    assert answer is not None and answer.startswith(b"HTTP/1.1 400 ")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert LINK.encode() in head and json.loads(body)["error"]["code"] == "invalid_http"


def test_a_connection_answered_before_its_body_arrived_is_closed_once_idle(tmp_path: Path) -> None:
    with running_collector(tmp_path, keep_alive_timeout=1) as server:
        head = b"POST /feedback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000\r\n\r\n"
        (sock,) = stalled(server.url, 1, head)  # over the limit: 413 at once, before the body
        sock.settimeout(2)
        assert sock.recv(65536).startswith(b"HTTP/1.1 413 ")
        sock.sendall(b" " * 20000)  # the body the client was sending anyway
        started = time.monotonic()
        assert read_until_closed(sock, started + 3) == b"" and time.monotonic() - started < 2
        sock.close()


# -- content type ---------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [
    "text/plain; charset=json", "text/json", "application/jsonx", "application/x-www-form-urlencoded; x=json",
    "multipart/form-data; boundary=json", "application/+json", "", "json",
])
def test_only_json_media_types_are_accepted(server: RunningCollector, content_type: str) -> None:
    for path, body, headers in (("/feedback", SUBMISSION, {}), ("/v1/records", {"records": []}, INGEST)):
        answer = post(server, path, body, content_type, **headers)
        assert answer.status_code == 415, (path, content_type)
        assert answer.json()["error"]["code"] == "unsupported_media_type"
    put = httpx.put(server.url + "/v1/known-issues/iss_1", content=b"{}",
                    headers={"content-type": content_type, **PIPE})
    assert put.status_code == 415


@pytest.mark.parametrize("content_type", ["application/json", "Application/JSON; charset=utf-8",
                                          "application/vnd.afp+json", "application/problem+json; charset=UTF-8"])
def test_json_and_structured_json_media_types_are_accepted(server: RunningCollector, content_type: str) -> None:
    assert post(server, "/feedback", SUBMISSION, content_type).status_code == 202


# -- every error in the AFP shape ------------------------------------------------------------


def test_unknown_paths_and_methods_answer_in_the_afp_shape_with_the_real_allow_header(
        server: RunningCollector) -> None:
    missing = httpx.get(server.url + "/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert missing.headers["link"] == LINK
    for method, path, allowed in (("DELETE", "/v1/records", {"GET", "POST"}),
                                  ("HEAD", "/v1/records", {"GET", "POST"}),
                                  ("PATCH", "/feedback", {"POST"}),
                                  ("POST", "/v1/known-issues/iss_1", {"PUT", "DELETE"}),
                                  ("PUT", "/.well-known/agent-feedback", {"GET"}),
                                  ("POST", "/openapi.json", {"GET", "HEAD"})):
        answer = httpx.request(method, server.url + path, headers=PIPE)
        assert answer.status_code == 405, (method, path)
        assert method == "HEAD" or answer.json()["error"]["code"] == "method_not_allowed"
        assert set(answer.headers["allow"].split(", ")) == allowed, (method, path)
        assert answer.headers["link"] == LINK


# -- failed authentication counts towards the rate limit ------------------------------------


def test_failed_agent_authentication_counts_towards_the_per_ip_limit(tmp_path: Path) -> None:
    with running_collector(tmp_path, auth="required", rate_limit_per_ip=3) as server:
        guesses = [post(server, "/feedback", SUBMISSION, authorization=f"Bearer guess-{i}").status_code
                   for i in range(3)]
        assert guesses == [401, 401, 401]
        # Over the limit, even the right key is told to wait: no oracle for guessing keys.
        limited = post(server, "/feedback", SUBMISSION, authorization=f"Bearer {AGENT_KEY}")
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/records"), ("POST", "/v1/records"),
                                              ("GET", "/v1/known-issues"), ("DELETE", "/v1/known-issues/iss_1")])
def test_failed_key_authentication_counts_towards_the_per_ip_limit(tmp_path: Path, method: str, path: str) -> None:
    right = INGEST if (method, path) == ("POST", "/v1/records") else PIPE
    with running_collector(tmp_path, rate_limit_per_ip=2) as server:
        def call(headers: dict[str, str]) -> httpx.Response:
            return httpx.request(method, server.url + path, content=b'{"records": []}',
                                 headers={"content-type": "application/json", **headers})

        assert [call({"authorization": "Bearer guess"}).status_code for _ in range(2)] == [401, 401]
        limited = call({"authorization": "Bearer guess"})
        assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1 and limited.headers["link"] == LINK
        assert call(right).status_code == 429


def test_successful_key_requests_are_not_rate_limited(tmp_path: Path) -> None:
    with running_collector(tmp_path, rate_limit_per_ip=2) as server:
        statuses = [httpx.get(server.url + "/v1/known-issues", headers=PIPE).status_code for _ in range(5)]
    assert statuses == [200] * 5


# -- JSON-RPC ids ---------------------------------------------------------------------------


@pytest.mark.parametrize("rpc_id", [False, True, 1.5, {"a": 1}, [1]])
def test_json_rpc_errors_never_echo_an_id_that_is_not_a_string_or_an_integer(
        server: RunningCollector, rpc_id: Any) -> None:
    for method in ("feedback/submit", "feedback/other"):
        answer = post(server, "/api/mcp/feedback", {"jsonrpc": "2.0", "id": rpc_id, "method": method,
                                                    "params": SEP_PARAMS})
        assert answer.status_code == 400
        assert answer.json()["jsonrpc"] == "2.0" and answer.json()["id"] is None, answer.text


# -- the OpenAPI document states the limits the code enforces --------------------------------


def test_the_openapi_document_states_the_body_limits_and_the_path_id_rule(server: RunningCollector) -> None:
    doc = httpx.get(server.url + "/openapi.json").json()
    limits = {("/feedback", "post"): 16384, ("/api/v1/feedback", "post"): 16384,
              ("/api/mcp/feedback", "post"): 16384, ("/v1/records", "post"): 100 * (16384 + 1024),
              ("/v1/known-issues/{issue_id}", "put"): 10 * 1024 * 1024}
    for (path, method), limit in limits.items():
        operation = doc["paths"][path][method]
        assert operation["requestBody"]["x-max-bytes"] == limit, path
        assert str(limit) in operation["requestBody"]["description"]
        assert str(limit) in operation["responses"]["413"]["description"]
    for method in ("put", "delete"):
        (parameter,) = doc["paths"]["/v1/known-issues/{issue_id}"][method]["parameters"]
        assert parameter["schema"]["pattern"] == "^[A-Za-z0-9._:~-]{1,200}$"


@pytest.mark.parametrize("issue_id", ["x" * 201, "a%20b", "%C3%A9t%C3%A9", "a%00b"])
def test_ids_outside_the_path_rule_are_400(server: RunningCollector, issue_id: str) -> None:
    issue = {"id": "x", "title": "t", "status": "planned"}
    for answer in (httpx.put(f"{server.url}/v1/known-issues/{issue_id}", json=issue, headers=PIPE),
                   httpx.delete(f"{server.url}/v1/known-issues/{issue_id}", headers=PIPE)):
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"
        assert answer.json()["error"]["details"][0]["path"] == "issue_id"


# -- the request log -------------------------------------------------------------------------


def test_the_request_log_names_the_route_not_the_raw_path(server: RunningCollector,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    secret = "ghp_" + "Z" * 36
    with caplog.at_level(logging.INFO):
        httpx.delete(f"{server.url}/v1/known-issues/{secret}", headers=PIPE)
        httpx.get(f"{server.url}/{secret}")
        httpx.post(f"{server.url}/v1/known-issues/{secret}", headers=PIPE)
    paths = [json.loads(r.getMessage())["path"] for r in collector_lines(caplog)]
    assert paths == ["/v1/known-issues/{issue_id}", "(unmatched)", "/v1/known-issues/{issue_id}"]
    assert not [r for r in caplog.records if r.name != "httpx" and secret in r.getMessage()]  # httpx: the client's


# -- schemathesis: negative and stateful -----------------------------------------------------

#: schemathesis's checks, all but one: "every schema-valid request is accepted"
#: (positive_data_acceptance) is no promise of the collector's, whose byte limit, nesting limit
#: and "the body's id is the path's" are rules no JSON Schema can state. 413 is a rejection too.
SCHEMATHESIS = {
    "checks": {
        "positive_data_acceptance": {"enabled": False},
        "negative_data_rejection": {"expected-statuses": ["400", "401", "404", "405", "413", "415", "429"]},
        # POST /v1/records answers 200 for a batch that may reject some records: an id in its
        # results is not a record created, so "the created resource must be found" does not apply.
        "ensure_resource_availability": {"enabled": False},
    },
    "generation": {"mode": "all"},
}
BOUNDED = hypothesis.settings(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck),
                              phases=[hypothesis.Phase.generate])


def keys_for(case: schemathesis.Case) -> dict[str, str]:
    ingest = case.operation.path.startswith("/v1/records") and case.method.upper() in ("POST", "DELETE")
    return INGEST if ingest else PIPE


def reset(server: RunningCollector) -> None:
    """An empty collector, so that every stateful scenario starts from the same state (what
    Hypothesis needs to replay one)."""
    con = server.collector.store.con
    for table in ("records", "tombstones", "known_issues", "sqlite_sequence"):
        con.execute(f"DELETE FROM {table}")
    server.collector.reload_known_issues()


def coverage(schema: Any, operation: schemathesis.APIOperation) -> None:
    """schemathesis's coverage cases, deterministic: boundary values, each wrong type, missing
    fields, and the methods the path does not take (405 with the right Allow header)."""
    generation = schema.config.generation_for(operation=operation, phase="coverage")
    for case in schema.iter_coverage_cases(operation, generation_modes=list(schemathesis.GenerationMode),
                                           generation_config=generation):
        case.call_and_validate(headers=keys_for(case))


def negative(operation: schemathesis.APIOperation) -> None:
    """Random input that breaks the operation's schema: every case must be a 4xx."""
    if not (any(operation.iter_parameters()) or len(operation.body)):
        return  # no input to break

    @given(case=operation.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE))
    @hypothesis.settings(BOUNDED, max_examples=40)
    def rejected(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=keys_for(case))

    rejected()


def stateful(schema: Any, server: RunningCollector) -> None:
    """Sequences along the document's links (PUT then DELETE a known issue, page after page of
    records …), valid and invalid steps mixed, with the stateful checks (use after free …)."""

    class Sequences(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            reset(server)

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"headers": keys_for(case)}

    Sequences.run(settings=hypothesis.settings(BOUNDED, max_examples=40, stateful_step_count=8))


def test_schemathesis_coverage_negative_and_stateful_checks_pass(tmp_path: Path) -> None:
    with running_collector(tmp_path, rate_limit_per_account=0, rate_limit_per_ip=0) as server:
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json",
                                               config=schemathesis.Config.from_dict(SCHEMATHESIS))
        for result in schema.get_all_operations():
            coverage(schema, result.ok())
            negative(result.ok())
        stateful(schema, server)
