"""The collector, over real HTTP on 127.0.0.1: agents, services and the pipeline."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from backloop import FeedbackClient, FeedbackHandler, forward_to, validate_ack

from feedback_insights.config import Config, HttpCollectorConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.ingest import (
    CollectorClient,
    CollectorError,
    cursors,
    ingest,
    open_source,
    process,
    start_run,
    store_batch,
)
from feedback_insights.warehouse import Warehouse

from .collector_server import (
    AGENT_KEY,
    HMAC_KEY,
    INGEST_KEY,
    PIPELINE_KEY,
    RunningCollector,
    running_collector,
)
from .test_dialects import AFS_SNAKE, SEP_PARAMS

SUBMISSION = {
    "type": "missing_capability",
    "goal": "Find companies currently hiring GTM engineers",
    "endpoint": "/companies/search",
    "method": "GET",
    "message": "No hiring-role filter is available on /companies/search",
    "outcome": "blocked",
    "session_id": "sess_42",
}
PIPE = {"authorization": f"Bearer {PIPELINE_KEY}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningCollector]:
    with running_collector(tmp_path) as running:
        yield running


def post(server: RunningCollector, path: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(server.url + path, content=json.dumps(body), headers={"content-type": "application/json", **headers})


def pull_all(server: RunningCollector) -> list[dict[str, Any]]:
    records, after = [], None
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        while True:
            page = client.pull(after, 2)
            records += page["records"]
            after = page["next_cursor"]
            if not page["has_more"]:
                return records


def test_discovery_and_the_link_header_on_errors(server: RunningCollector) -> None:
    doc = httpx.get(server.url + "/.well-known/agent-feedback").json()
    assert doc == {"spec_version": "0.1", "endpoint": server.url + "/feedback", "types": doc["types"],
                   "max_bytes": 16384, "auth": "optional"}
    assert "missing_capability" in doc["types"]
    for response in (httpx.get(server.url + "/nope"), post(server, "/feedback", {"type": "bug"}),
                     httpx.get(server.url + "/v1/records")):
        assert response.status_code >= 400
        assert response.headers["link"] == '</feedback>; rel="agent-feedback"'
    assert "/feedback" in httpx.get(server.url + "/openapi.json").json()["paths"]


def test_submissions_are_acknowledged_and_checked(server: RunningCollector) -> None:
    ack = post(server, "/feedback", SUBMISSION, authorization=f"Bearer {AGENT_KEY}")
    assert ack.status_code == 202 and validate_ack(ack.json()).valid
    retry = post(server, "/feedback", SUBMISSION, authorization=f"Bearer {AGENT_KEY}")
    assert retry.status_code == 202 and retry.json()["id"] == ack.json()["id"]

    bad = post(server, "/feedback", {**SUBMISSION, "severity": "high", "type": "feature_request"})
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["code"] == "invalid_feedback"
    assert {d["path"] for d in error["details"]} == {"severity", "type"}
    assert post(server, "/feedback", {**SUBMISSION, "message": "x" * 17_000}).status_code == 413
    wrong_type = httpx.post(server.url + "/feedback", content=b"{}", headers={"content-type": "text/plain"})
    assert wrong_type.status_code == 415
    not_json = httpx.post(server.url + "/feedback", content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_json"


def test_every_dialect_is_accepted_and_pulled_back_scrubbed(server: RunningCollector) -> None:
    leaky = {**SUBMISSION, "session_id": "s2", "message": "Token sk-proj-" + "a1B2" * 12 + " failed for jane@example.com"}
    assert post(server, "/feedback", leaky, authorization=f"Bearer {AGENT_KEY}").status_code == 202
    camel = {{"tool_name": "toolName", "satisfaction_score": "satisfactionScore"}.get(k, k): v for k, v in AFS_SNAKE.items()}
    assert post(server, "/api/v1/feedback", camel).status_code == 202
    assert post(server, "/api/mcp/feedback", SEP_PARAMS).status_code == 202
    rpc = post(server, "/api/mcp/feedback", {"jsonrpc": "2.0", "id": 9, "method": "feedback/submit", "params": SEP_PARAMS})
    assert rpc.status_code == 200 and rpc.json()["id"] == 9 and rpc.json()["result"]["accepted"] is True
    bad_rpc = post(server, "/api/mcp/feedback", {"jsonrpc": "2.0", "id": 1, "method": "feedback/other", "params": SEP_PARAMS})
    assert bad_rpc.status_code == 400
    assert bad_rpc.json()["id"] == 1 and bad_rpc.json()["error"]["code"] == -32601
    assert bad_rpc.json()["error"]["data"]["details"][0]["path"] == "method"
    bad_params = post(server, "/api/mcp/feedback", {"jsonrpc": "2.0", "id": "r2", "method": "feedback/submit", "params": {"items": []}})
    assert bad_params.json()["error"]["code"] == -32602 and bad_params.json()["id"] == "r2"

    records = pull_all(server)
    assert len(records) == 4
    text = json.dumps(records)
    assert "sk-proj-" not in text and "jane@example.com" not in text and "customer-1" not in text
    assert records[0]["account"].startswith("acct_") and records[0]["service"] == "acme-companies-api"
    assert [r["source"] for r in records] == ["http", "http", "mcp", "mcp"]


def test_auth_required_and_rate_limits(tmp_path: Path) -> None:
    with running_collector(tmp_path, auth="required", rate_limit_per_account=2) as server:
        assert post(server, "/feedback", SUBMISSION).status_code == 401
        assert post(server, "/feedback", SUBMISSION, authorization="Bearer wrong").status_code == 401
        statuses = [post(server, "/feedback", {**SUBMISSION, "session_id": f"s{i}"},
                         authorization=f"Bearer {AGENT_KEY}").status_code for i in range(3)]
        assert statuses == [202, 202, 429]
        limited = post(server, "/feedback", SUBMISSION, authorization=f"Bearer {AGENT_KEY}")
        assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60


def test_services_forward_records_in_batches(server: RunningCollector) -> None:
    record = {"id": "fb_svc_1", "received_at": "2026-11-02T10:00:00Z", "service": "orbit-mcp",
              "account": "acct_raw_9", "source": "sdk", "feedback": SUBMISSION}
    assert post(server, "/v1/records", {"records": [record]}).status_code == 401
    answer = post(server, "/v1/records", {"records": [record, record, {**record, "id": "fb_svc_2", "feedback": {"type": "x"}}]},
                  authorization=f"Bearer {INGEST_KEY}")
    results = answer.json()["results"]
    assert [r["status"] for r in results] == ["accepted", "duplicate", "rejected"]
    assert {d["path"] for d in results[2]["error"]["details"]} >= {"feedback.type", "feedback.goal"}
    too_many = post(server, "/v1/records", {"records": [record] * 101}, authorization=f"Bearer {INGEST_KEY}")
    assert too_many.status_code == 400


def test_pull_pages_never_miss_or_repeat_while_writes_continue(server: RunningCollector) -> None:
    seen: list[str] = []
    after = None
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        for i in range(12):
            post(server, "/feedback", {**SUBMISSION, "session_id": f"w{i}"})
            page = client.pull(after, 3)
            seen += [r["id"] for r in page["records"]]
            after = page["next_cursor"]
        while (page := client.pull(after, 3))["records"]:
            seen += [r["id"] for r in page["records"]]
            after = page["next_cursor"]
    assert len(seen) == len(set(seen)) == 12
    bad = httpx.get(server.url + "/v1/records", params={"after": "garbage!"}, headers=PIPE)
    assert bad.status_code == 400


def test_a_known_issue_is_returned_to_the_next_matching_agent(server: RunningCollector) -> None:
    first = post(server, "/feedback", SUBMISSION).json()
    issue = {"id": "iss_hiring_role", "title": "Add hiring-role filter to /companies/search", "status": "planned",
             "url": "https://github.com/acme/api/issues/412", "workaround": "Search /jobs?role=... and join on company_id"}
    match = {"record_ids": [first["id"]],
             "fingerprints": [{"service": "acme-companies-api", "tool": "/companies/search", "terms": ["hiring"]}]}
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        client.put_known_issue(issue, match)
    again = post(server, "/feedback", {**SUBMISSION, "session_id": "other", "message": "Can't filter by hiring role"})
    assert again.status_code == 202 and again.json()["known_issue"] == issue
    unrelated = post(server, "/feedback", {**SUBMISSION, "session_id": "x", "endpoint": "/jobs", "message": "slow"})
    assert "known_issue" not in unrelated.json()
    listed = httpx.get(server.url + "/v1/known-issues", headers=PIPE).json()["known_issues"]
    assert listed == [{**issue, "match": match}]
    bad = httpx.put(server.url + "/v1/known-issues/other", json={**issue, "status": "done"}, headers=PIPE)
    assert bad.status_code == 400 and {d["path"] for d in bad.json()["error"]["details"]} == {"status"}
    assert httpx.delete(server.url + "/v1/known-issues/iss_hiring_role", headers=PIPE).status_code == 204
    assert "known_issue" not in post(server, "/feedback", {**SUBMISSION, "session_id": "y"}).json()


def test_the_afp_sdk_client_and_forwarding_service_interoperate(server: RunningCollector) -> None:
    issue = {"id": "iss_1", "title": "Hiring-role filter", "status": "in_progress"}
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        client.put_known_issue(issue, {"fingerprints": [{"terms": ["hiring-role"]}]})
    # An agent: discovers the endpoint, submits, and is told the problem is known.
    agent = FeedbackClient.from_discovery(server.url, api_key=AGENT_KEY, session_id="sdk-run-1")
    assert agent is not None
    ack = agent.submit({"type": "missing_capability", "goal": "Find GTM hiring", "message": "No hiring-role filter"})
    assert ack["known_issue"] == issue
    # A service: its own FeedbackHandler forwards each record to our POST /v1/records.
    handler = FeedbackHandler(forward_to(server.url, ingest_key=INGEST_KEY), service="orbit-mcp", rate_limit=None)
    status, body, _ = handler.handle_submit(json.dumps(SUBMISSION), "application/json", account="acct_svc_7")
    assert status == 202 and body["known_issue"] == issue
    records = pull_all(server)
    assert [r["service"] for r in records] == ["acme-companies-api", "orbit-mcp"]


def test_the_pipeline_pulls_each_record_once_even_after_a_crash(tmp_path: Path, server: RunningCollector,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(7):
        post(server, "/feedback", {**SUBMISSION, "session_id": f"p{i}"}, authorization=f"Bearer {AGENT_KEY}")
    monkeypatch.setenv("COLLECTOR_KEY", PIPELINE_KEY)
    config = Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PrivacyConfig(hmac_key=HMAC_KEY),
        sources=[HttpCollectorConfig(kind="http", name="acme", url=server.url, key_env="COLLECTOR_KEY", page_size=3)],
    )
    with Warehouse(config.warehouse.path) as wh:
        # A run stores the first page and dies before its cursor moves...
        first = next(iter(open_source(config.sources[0]).batches({})))
        processed = process(first.items, collector="acme", source_uri=first.source_uri,
                            received_at="2026-11-30T00:00:00Z", pseudonymise=lambda a: a)
        store_batch(wh, processed, collector="acme", source_uri=first.source_uri, run_id=start_run(wh))
        assert cursors(wh, "acme") == {}
        # ...the next run pulls that page again: nothing doubled, nothing missing.
        summary = ingest(config, wh)
        assert (summary.counts.new, summary.counts.already) == (4, 3)
        assert wh.con.execute("SELECT count(*), count(DISTINCT id) FROM records").fetchone() == (7, 7)
        # Every agent dialect the collector takes arrives in the warehouse as itself.
        post(server, "/feedback", {**SUBMISSION, "session_id": "late"})
        post(server, "/api/v1/feedback", AFS_SNAKE, authorization=f"Bearer {AGENT_KEY}")
        post(server, "/api/mcp/feedback", {"jsonrpc": "2.0", "id": 3, "method": "feedback/submit", "params": SEP_PARAMS})
        assert ingest(config, wh).counts.new == 1 + 1 + len(SEP_PARAMS["items"])
        dialects = dict(wh.con.execute("SELECT dialect, count(*) FROM records GROUP BY ALL").fetchall())
        assert dialects == {"afp": 8, "afs": 1, "sep2369": 3}
        accounts = {a for (a,) in wh.con.execute("SELECT DISTINCT account FROM records WHERE account IS NOT NULL").fetchall()}
    assert len(accounts) == 1 and accounts.pop().startswith("acct_")


def test_a_wrong_key_or_a_dead_collector_is_one_clear_error(tmp_path: Path, server: RunningCollector,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WRONG", "nope")
    config = Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PrivacyConfig(hmac_key="k" * 32),
        sources=[HttpCollectorConfig(kind="http", name="a", url=server.url, key_env="WRONG"),
                 HttpCollectorConfig(kind="http", name="b", url="http://127.0.0.1:9", key_env="WRONG", retries=1)],
    )
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
    assert summary.errors[0] == f"a: collector {server.url} refused the key (401): check the pipeline key"
    assert summary.errors[1].startswith("b: collector http://127.0.0.1:9 is unreachable")


class _Flaky(BaseHTTPRequestHandler):
    """A real HTTP server that answers 429 (with Retry-After), then 503, then the page."""

    answers: ClassVar[list[tuple[int, dict[str, str]]]] = []
    seen: ClassVar[list[float]] = []

    def do_GET(self) -> None:
        self.seen.append(time.monotonic())
        status, headers = self.answers.pop(0) if self.answers else (200, {})
        body = b'{"records": [], "next_cursor": "c0", "has_more": false}' if status == 200 else b"{}"
        self.send_response(status)
        for name, value in {"content-type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


def test_the_client_retries_429_and_5xx_honouring_retry_after() -> None:
    _Flaky.answers = [(429, {"retry-after": "1"}), (503, {})]
    _Flaky.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with CollectorClient(f"http://127.0.0.1:{server.server_port}", "k", backoff=0.05) as client:
            assert client.pull(None, 10)["next_cursor"] == "c0"
        assert len(_Flaky.seen) == 3
        assert _Flaky.seen[1] - _Flaky.seen[0] >= 0.95  # waited as told
        _Flaky.answers = [(503, {})] * 3
        flaky = CollectorClient(f"http://127.0.0.1:{server.server_port}", "k", retries=2, backoff=0.01)
        with flaky, pytest.raises(CollectorError, match="answered 503 /v1/records; gave up after 3 tries"):
            flaky.pull(None, 10)
    finally:
        server.shutdown()


def test_requests_are_logged_as_json_lines_without_feedback_text(server: RunningCollector,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="feedback_insights.collector"):
        post(server, "/feedback", {**SUBMISSION, "message": "very private words here"})
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "feedback_insights.collector"]
    assert lines and lines[-1]["path"] == "/feedback" and lines[-1]["status"] == 202
    assert set(lines[-1]) == {"method", "path", "status", "ms", "ip"}
    assert "private" not in caplog.text


def _put_everywhere(clients: list[CollectorClient], issue: dict, match: dict) -> list[str]:
    errors = []
    for client in clients:
        try:
            client.put_known_issue(issue, match)
        except CollectorError as exc:
            errors.append(str(exc))
    return errors


def test_known_issues_reach_every_collector_and_a_refused_key_is_named(tmp_path: Path) -> None:
    issue = {"id": "iss_2", "title": "Cursor repeats on page 2", "status": "acknowledged"}
    with running_collector(tmp_path / "a") as first, running_collector(tmp_path / "b") as second:
        clients = [CollectorClient(first.url, PIPELINE_KEY), CollectorClient(second.url, "wrong-key")]
        errors = _put_everywhere(clients, issue, {"record_ids": ["fb_1"]})
        for client in clients:
            client.close()
        assert [i["id"] for i in httpx.get(first.url + "/v1/known-issues", headers=PIPE).json()["known_issues"]] == ["iss_2"]
        assert errors == [f"collector {second.url} refused the key (401): check the pipeline key"]


def test_a_failing_store_answers_503_with_retry_after_and_the_link(server: RunningCollector) -> None:
    server.collector.store.con.close()  # the database goes away under the running server
    answer = post(server, "/feedback", SUBMISSION)
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "unavailable"
    assert answer.headers["retry-after"] == "5" and answer.headers["link"] == '</feedback>; rel="agent-feedback"'


def test_agents_cannot_set_receiver_fields_or_invent_accounts(server: RunningCollector) -> None:
    record = {"id": "fb_mine", "received_at": "2020-01-01T00:00:00Z", "service": "someone-else",
              "account": "acct_victim", "feedback": SUBMISSION}
    refused = post(server, "/feedback", record)
    assert refused.status_code == 400 and refused.json()["error"]["details"][0]["path"] == "feedback"
    assert post(server, "/feedback", {**SUBMISSION, "session_id": "k1"}, authorization="Bearer made-up-1").status_code == 202
    assert post(server, "/feedback", {**SUBMISSION, "session_id": "k2"}, authorization="Bearer made-up-2").status_code == 202
    assert [r.get("account") for r in pull_all(server)] == [None, None]
    huge = httpx.post(server.url + "/feedback", content=b"{" + b" " * 5_000_000 + b"}",
                      headers={"content-type": "application/json"})
    assert huge.status_code == 413


def test_pulling_while_another_client_writes_misses_and_repeats_nothing(server: RunningCollector) -> None:
    def write() -> None:
        with httpx.Client() as http:
            for i in range(120):
                http.post(server.url + "/feedback", content=json.dumps({**SUBMISSION, "session_id": f"c{i}"}),
                          headers={"content-type": "application/json"})

    writer = threading.Thread(target=write)
    writer.start()
    seen: list[str] = []
    after = None
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        while writer.is_alive() or after is None or client.pull(after, 7)["records"]:
            page = client.pull(after, 7)
            seen += [r["id"] for r in page["records"]]
            after = page["next_cursor"]
    writer.join()
    assert len(seen) == len(set(seen)) == 120


def test_the_per_ip_limit_holds_for_anonymous_agents(tmp_path: Path) -> None:
    with running_collector(tmp_path, rate_limit_per_ip=2) as server:
        statuses = [post(server, "/feedback", {**SUBMISSION, "session_id": f"ip{i}"}).status_code for i in range(3)]
    assert statuses == [202, 202, 429]
