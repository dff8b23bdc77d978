"""The collector's MCP server (/mcp) and /llms.txt, over real HTTP on 127.0.0.1, driven by the
`mcp` SDK's own Streamable HTTP client: the tools are listed, called, acknowledged, stored,
refused and told about known issues exactly as the HTTP routes are."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import httpx2
import pytest
from backloop import FEEDBACK_TOOL_DESCRIPTION, validate_ack
from backloop.tool import feedback_tool_input_schema
from mcp import Client, ClientSession, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from feedback_insights.core import schemas_dir
from feedback_insights.core.vocabulary import CATEGORIES, LANES, SEVERITIES
from feedback_insights.ingest import dialects
from feedback_insights.ingest.dialects import Origin

from .collector_server import AGENT_KEY, PIPELINE_KEY, RunningCollector, running_collector
from .test_collector import SUBMISSION
from .test_collector_hostile import AGENT_WORDS, nested, read_until_closed, stalled
from .test_dialects import AFS_SNAKE, SEP_PARAMS

T = TypeVar("T")
PIPE = {"authorization": f"Bearer {PIPELINE_KEY}"}
LINK = '</feedback>; rel="agent-feedback"'
CAMEL = {{"tool_name": "toolName", "satisfaction_score": "satisfactionScore", "suggested_fix": "suggestedFix",
          "attempted_calls": "attemptedCalls"}.get(k, k): v for k, v in AFS_SNAKE.items()}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningCollector]:
    with running_collector(tmp_path) as running:
        yield running


@asynccontextmanager
async def mcp_session(server: RunningCollector, key: str | None) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """An initialised MCP client session against the collector's /mcp, its HTTP requests
    carrying ``key`` as the agent's Bearer credential (none when None)."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10, read=30)) as http,
        streamable_http_client(server.url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session, await session.initialize()


def in_session(server: RunningCollector, work: Callable[[ClientSession], Awaitable[T]], key: str | None = AGENT_KEY) -> T:
    async def main() -> T:
        async with mcp_session(server, key) as (session, _):
            return await work(session)

    return anyio.run(main)


def call(server: RunningCollector, tool: str, arguments: dict[str, Any], key: str | None = AGENT_KEY) -> types.CallToolResult:
    return in_session(server, lambda session: session.call_tool(tool, arguments), key)


def answer(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON in the result's one text block (AFP §7: the ack, or here the error object)."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def accepted(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    ack = answer(result)
    assert validate_ack(ack).valid and result.structured_content == ack
    return ack


def refused(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error and result.structured_content is None
    return answer(result)


def paths(error: dict[str, Any]) -> set[str]:
    return {d["path"] for d in error["error"]["details"]}


def records(server: RunningCollector) -> list[dict[str, Any]]:
    page = httpx.get(server.url + "/v1/records", params={"limit": 1000}, headers=PIPE).json()
    return page["records"]


def post(server: RunningCollector, path: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(server.url + path, content=json.dumps(body), headers={"content-type": "application/json", **headers})


def without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
    return [without_descriptions(v) for v in node] if isinstance(node, list) else node


def schema_file(name: str) -> dict[str, Any]:
    document = json.loads((schemas_dir() / name).read_text(encoding="utf-8"))
    return {k: v for k, v in document.items() if k not in ("$schema", "$id")}


# -- the tools ------------------------------------------------------------------------------


def test_the_tools_are_listed_with_their_schemas_and_descriptions(server: RunningCollector) -> None:
    async def main() -> tuple[types.InitializeResult, types.ListToolsResult]:
        async with mcp_session(server, None) as (session, init):
            return init, await session.list_tools()

    init, tools = anyio.run(main)
    assert init.server_info.name == "feedback-insights-collector"
    assert init.instructions and "submit_feedback" in init.instructions and "submit_agent_feedback" in init.instructions
    by_name = {tool.name: tool for tool in tools.tools}
    assert list(by_name) == ["submit_feedback", "submit_agent_feedback"]

    afp = by_name["submit_feedback"]
    feedback = schema_file("afp/feedback.schema.json")
    assert afp.input_schema == {"type": "object", "required": feedback["required"], "additionalProperties": False,
                                "properties": {k: v for k, v in feedback["properties"].items() if k != "spec_version"}}
    # The AFP SDK builds the same tool schema (its copy words one description differently).
    assert without_descriptions(afp.input_schema) == without_descriptions(feedback_tool_input_schema())
    assert afp.description and afp.description.startswith(FEEDBACK_TOOL_DESCRIPTION)

    afs = by_name["submit_agent_feedback"]
    properties = afs.input_schema["properties"]
    assert set(schema_file("afs.schema.json")["properties"]) <= set(properties)
    assert {"toolName", "feedbackType", "satisfactionScore", "suggestedFix", "attemptedCalls", "sessionId"} <= set(properties)
    assert properties["toolName"]["type"] == properties["tool_name"]["type"] == "string"
    assert afs.input_schema["required"] == ["summary"]
    assert properties["category"]["enum"] == list(CATEGORIES) and properties["feedback_type"]["enum"] == list(LANES)
    assert properties["severity"]["enum"] == [*SEVERITIES, 1, 2, 3, 4, 5]  # names, or the integer scale
    assert afs.description and "positive_feedback" in afs.description and "tool_name" in afs.description

    ack = schema_file("afp/ack.schema.json")
    for tool in (afp, afs):
        assert tool.description and "safe" in tool.description and "needs no confirmation" in tool.description
        assert "known_issue" in tool.description
        assert tool.output_schema == ack
        assert tool.annotations is not None
        assert (tool.annotations.read_only_hint, tool.annotations.destructive_hint) == (False, False)


def test_submit_feedback_is_acknowledged_stored_scrubbed_and_deduplicated(server: RunningCollector) -> None:
    token = "sk-proj-" + "a1B2" * 12
    leaky = {**SUBMISSION, "message": f"Token {token} failed for jane@example.com",
             "metadata": {"big": 123456789012345678901234567890}}
    first = accepted(call(server, "submit_feedback", leaky))
    assert first["id"].startswith("fb_") and first["status"] == "accepted" and "known_issue" not in first
    # A retry (same session_id and content) gets the first id, over MCP and over HTTP alike.
    assert accepted(call(server, "submit_feedback", leaky))["id"] == first["id"]
    over_http = post(server, "/feedback", leaky, authorization=f"Bearer {AGENT_KEY}")
    assert over_http.status_code == 202 and over_http.json()["id"] == first["id"]

    (record,) = records(server)
    assert record["id"] == first["id"] and record["source"] == "mcp"
    assert record["service"] == "acme-companies-api" and record["account"].startswith("acct_")
    assert record["feedback"]["goal"] == SUBMISSION["goal"]
    assert record["feedback"]["metadata"]["big"] == pytest.approx(1.2345678901234568e29)  # as a POSTed body is read
    text = json.dumps(record)
    assert token not in text and "jane@example.com" not in text and "customer-1" not in text


def test_submit_agent_feedback_takes_both_casings_and_near_misses(server: RunningCollector) -> None:
    snake = accepted(call(server, "submit_agent_feedback", AFS_SNAKE))
    camel = accepted(call(server, "submit_agent_feedback", {**CAMEL, "summary": "Cursor repeats page 2 (camel)"}))
    near_miss = accepted(call(server, "submit_agent_feedback", {"toolName": "search", "summary": "No date filter",
                                                                 "feedbackType": "Feature Request", "category": "feature",
                                                                 "severity": 4}))
    sep = accepted(call(server, "submit_agent_feedback", SEP_PARAMS))  # SEP-2369, as /api/v1/feedback takes it
    stored = {r["id"]: r for r in records(server)}
    assert list(stored) == [snake["id"], camel["id"], near_miss["id"], sep["id"]]
    assert {r["source"] for r in stored.values()} == {"mcp"}
    assert "tool_name" in stored[snake["id"]]["feedback"] and "toolName" in stored[camel["id"]]["feedback"]

    def canonical(record: dict[str, Any]) -> list[dict[str, Any]]:
        module = dialects.detect(record, "afs")
        assert module is not None
        return dialects.dialect(module).normalise(record, Origin("collector", record["received_at"], service=record["service"]))

    (from_snake,), (from_camel,) = canonical(stored[snake["id"]]), canonical(stored[camel["id"]])
    for field in ("tool", "category", "severity", "outcome", "rating", "suggestion"):
        assert from_snake[field] == from_camel[field], field
    (folded,) = canonical(stored[near_miss["id"]])
    assert (folded["lane"], folded["category"], folded["severity"]) == ("feature_request", "missing_capability", "high")
    assert len(canonical(stored[sep["id"]])) == len(SEP_PARAMS["items"])
    assert stored[sep["id"]]["service"] == "acme-companies-api"  # the agent's own service claim is dropped


def test_an_invalid_call_is_a_tool_error_naming_each_field_as_the_http_route_does(server: RunningCollector) -> None:
    wrong = {**SUBMISSION, "severity": "high", "type": "feature_request"}
    error = refused(call(server, "submit_feedback", wrong))
    assert error["error"]["code"] == "invalid_feedback" and paths(error) == {"severity", "type"}
    assert error == post(server, "/feedback", wrong).json()  # the very answer of POST /feedback
    assert paths(refused(call(server, "submit_feedback", {}))) == {"type", "goal", "message"}

    assert paths(refused(call(server, "submit_agent_feedback", {"summary": "s"}))) == {"tool_name"}
    nonsense = {"tool_name": "t", "summary": "s", "category": "nonsense"}
    assert paths(refused(call(server, "submit_agent_feedback", nonsense))) == {"category"}
    assert refused(call(server, "submit_agent_feedback", nonsense)) == post(server, "/api/v1/feedback", nonsense).json()

    deep = refused(call(server, "submit_feedback", {**SUBMISSION, "metadata": nested(70)}))
    assert deep["error"]["details"] == [{"path": "metadata." + ".".join([AGENT_WORDS] * 63),
                                         "message": "nests deeper than 64 levels"}]
    too_large = refused(call(server, "submit_feedback", {**SUBMISSION, "message": "x" * 17_000}))
    assert too_large["error"]["code"] == "payload_too_large" and "16384" in too_large["error"]["message"]
    record = {"id": "fb_mine", "received_at": "2020-01-01T00:00:00Z", "account": "acct_victim", "feedback": SUBMISSION}
    assert paths(refused(call(server, "submit_feedback", record))) == {"feedback"}

    async def unknown_tool(session: ClientSession) -> MCPError:
        try:
            await session.call_tool("submit_something", SUBMISSION)
        except MCPError as exc:  # a protocol error, as MCP has it for a tool that does not exist
            return exc
        raise AssertionError("an unknown tool was called")

    assert in_session(server, unknown_tool).code == types.INVALID_PARAMS
    assert records(server) == []


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_clients_of_either_protocol_era_submit_with_their_credential(tmp_path: Path, mode: str) -> None:
    """The SDK's high-level Client, in the initialize-handshake era and in the per-request era
    (whose requests the SDK routes differently): the Bearer header names the account in both."""
    async def main() -> types.CallToolResult:
        async with (
            httpx2.AsyncClient(headers={"authorization": f"Bearer {AGENT_KEY}"}) as http,
            Client(streamable_http_client(server.url + "/mcp", http_client=http), mode=mode) as client,
        ):
            assert [tool.name for tool in (await client.list_tools()).tools] == ["submit_feedback", "submit_agent_feedback"]
            return await client.call_tool("submit_agent_feedback", AFS_SNAKE)

    with running_collector(tmp_path, auth="required") as server:
        ack = accepted(anyio.run(main))
        (record,) = records(server)
        assert record["id"] == ack["id"] and record["account"].startswith("acct_")


def test_auth_required_refuses_a_call_without_a_valid_key(tmp_path: Path) -> None:
    with running_collector(tmp_path, auth="required") as server:
        # Listing stays open, like the discovery document: an agent learns the tool exists.
        names = in_session(server, lambda session: session.list_tools(), key=None)
        assert [tool.name for tool in names.tools] == ["submit_feedback", "submit_agent_feedback"]
        for key in (None, "wrong"):
            for tool, arguments in (("submit_feedback", SUBMISSION), ("submit_agent_feedback", AFS_SNAKE)):
                error = refused(call(server, tool, arguments, key=key))
                assert error["error"]["code"] == "unauthorized", (key, tool)
        assert records(server) == []
        accepted(call(server, "submit_feedback", SUBMISSION))
        (record,) = records(server)
        assert record["account"].startswith("acct_")
        assert "required" in httpx.get(server.url + "/llms.txt").text


def test_failed_authentications_over_mcp_count_towards_the_per_ip_limit(tmp_path: Path) -> None:
    with running_collector(tmp_path, auth="required", rate_limit_per_ip=3) as server:
        guesses = [refused(call(server, "submit_feedback", SUBMISSION, key=f"guess-{i}"))["error"]["code"]
                   for i in range(3)]
        assert guesses == ["unauthorized"] * 3
        # Over the limit even the right key is told to wait, with when: no oracle for guessing keys.
        limited = refused(call(server, "submit_feedback", SUBMISSION))
        assert limited["error"]["code"] == "rate_limited" and 1 <= limited["retry_after"] <= 60


def test_a_known_issue_comes_back_in_the_tool_result(server: RunningCollector) -> None:
    first = accepted(call(server, "submit_feedback", SUBMISSION))
    issue = {"id": "iss_hiring_role", "title": "Add hiring-role filter to /companies/search", "status": "planned",
             "url": "https://github.com/acme/api/issues/412", "workaround": "Search /jobs?role=... and join on company_id"}
    match = {"record_ids": [first["id"]],
             "fingerprints": [{"service": "acme-companies-api", "tool": "/companies/search", "terms": ["hiring"]}]}
    put = httpx.put(server.url + "/v1/known-issues/iss_hiring_role", json={**issue, "match": match}, headers=PIPE)
    assert put.status_code == 201
    retry = accepted(call(server, "submit_feedback", SUBMISSION))  # the first record, which the issue lists
    assert retry["id"] == first["id"] and retry["known_issue"] == issue
    again = accepted(call(server, "submit_feedback", {**SUBMISSION, "session_id": "other",
                                                      "message": "Can't filter by hiring role"}))
    assert again["id"] != first["id"] and again["known_issue"] == issue  # by its fingerprint
    afs = accepted(call(server, "submit_agent_feedback", {"tool_name": "/companies/search",
                                                          "summary": "No hiring filter on company search"}))
    assert afs["known_issue"] == issue
    unrelated = accepted(call(server, "submit_feedback", {**SUBMISSION, "session_id": "x", "endpoint": "/jobs",
                                                          "message": "slow"}))
    assert "known_issue" not in unrelated


# -- llms.txt -------------------------------------------------------------------------------


def test_llms_txt_describes_the_endpoints_and_tools_as_the_discovery_document_does(server: RunningCollector) -> None:
    answer = httpx.get(server.url + "/llms.txt")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/markdown")
    text = answer.text
    discovery = httpx.get(server.url + "/.well-known/agent-feedback").json()
    assert text.startswith("# Agent feedback for `acme-companies-api`\n\n> ")
    assert f"[POST {discovery['endpoint']}]({discovery['endpoint']})" in text
    assert all(f"`{t}`" in text for t in discovery["types"])
    assert f"at most {discovery['max_bytes']} bytes" in text and f"Authentication: {discovery['auth']}." in text
    for path in ("/api/v1/feedback", "/api/mcp/feedback", "/mcp"):
        assert f"({server.url}{path})" in text, path
    assert "`submit_feedback`" in text and "`submit_agent_feedback`" in text
    assert "safe" in text and "needs no confirmation" in text and "welcome" in text
    assert "600 per minute per account" in text and "1200 per minute per IP address" in text
    links = re.findall(r"\]\((http[^)]+)\)", text)
    assert links and all(link.startswith(server.url) for link in links)
    for link in (server.url + "/.well-known/agent-feedback", server.url + "/openapi.json"):
        assert link in links and httpx.get(link).status_code == 200
    paths = httpx.get(server.url + "/openapi.json").json()["paths"]
    assert "/llms.txt" not in paths and "/mcp" not in paths


# -- the transport --------------------------------------------------------------------------


def test_mcp_takes_only_post_refuses_web_pages_and_bounds_the_request(server: RunningCollector) -> None:
    for method in ("GET", "DELETE", "PUT"):
        answer = httpx.request(method, server.url + "/mcp")
        assert answer.status_code == 405 and answer.json()["error"]["code"] == "method_not_allowed"
        assert answer.headers["allow"] == "POST" and answer.headers["link"] == LINK
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    page = httpx.post(server.url + "/mcp", json=rpc, headers={"origin": "https://evil.example",
                                                                "accept": "application/json, text/event-stream"})
    assert page.status_code == 403 and page.json()["error"]["code"] == "forbidden" and page.headers["link"] == LINK
    huge = httpx.post(server.url + "/mcp", content=b'{"jsonrpc": "2.0", "x": "' + b"a" * 1_000_000 + b'"}',
                      headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    assert huge.status_code == 413 and huge.headers["link"] == LINK


#: What an MCP client POSTs; a stateless server needs no initialize first.
RPC_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "authorization": f"Bearer {AGENT_KEY}"}
MISSING = object()


def rpc(server: RunningCollector, method: str, rpc_id: Any = MISSING, **params: Any) -> httpx.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if rpc_id is not MISSING:
        message["id"] = rpc_id
    return httpx.post(server.url + "/mcp", content=json.dumps(message), headers=RPC_HEADERS)


def test_a_call_whose_id_is_invalid_or_missing_is_an_invalid_request_and_stores_nothing(
        server: RunningCollector) -> None:
    """JSON-RPC 2.0: an id is a string or an integer (MCP: never null); a message without one is a
    notification, which tools/call is not. The SDK alone answered all of these 202, empty."""
    call_params = {"name": "submit_feedback", "arguments": SUBMISSION}
    for rpc_id in (None, False, True, {}, [], 1.5, 2.0, MISSING):
        for method, params in (("tools/call", call_params), ("tools/list", {})):
            answer = rpc(server, method, rpc_id, **params)
            assert answer.status_code == 400, (rpc_id, method, answer.status_code, answer.text)
            assert answer.headers["content-type"] == "application/json" and answer.headers["link"] == LINK
            body = answer.json()
            assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", None, types.INVALID_REQUEST)
            assert ("notification" if rpc_id is MISSING else "id") in body["error"]["message"], body
    assert server.collector.store.count() == 0
    # Notifications are still taken (202, empty), and valid ids are answered with themselves.
    notified = rpc(server, "notifications/initialized")
    assert (notified.status_code, notified.content) == (202, b"")
    for rpc_id in (0, -7, 2**70, "", "call-1"):
        answer = rpc(server, "tools/call", rpc_id, **call_params)
        assert answer.status_code == 200 and answer.json()["id"] == rpc_id, (rpc_id, answer.text)
        assert not answer.json()["result"]["isError"]
    assert server.collector.store.count() == 5  # the first report and its retries


def test_a_stalled_mcp_body_is_closed_within_the_body_timeout(tmp_path: Path) -> None:
    with running_collector(tmp_path, body_timeout=1.0) as server:
        head = (b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nContent-Length: 500\r\n\r\n")
        (sock,) = stalled(server.url, 1, head + b'{"jsonrpc": "2.0"')
        started = time.monotonic()
        closed = read_until_closed(sock, started + 3.0)
        sock.close()
        assert closed is not None and closed.startswith(b"HTTP/1.1 408 ") and time.monotonic() - started < 2.5
        accepted(call(server, "submit_feedback", SUBMISSION))


def test_a_server_fault_is_a_tool_error_to_retry_later_logged_in_one_line(
        server: RunningCollector, caplog: pytest.LogCaptureFixture) -> None:
    server.collector.store.con.close()  # a genuine fault: the database goes away
    with caplog.at_level(logging.INFO):
        error = refused(call(server, "submit_feedback", {**SUBMISSION, "message": f"private {AGENT_WORDS}"}))
    assert error["error"]["code"] == "unavailable" and error["retry_after"] == 5
    faults = [r for r in caplog.records if r.name.startswith("feedback_insights.collector") and r.levelno >= logging.ERROR]
    assert len(faults) == 1 and faults[0].exc_info is None
    line = json.loads(faults[0].getMessage())
    assert line["tool"] == "submit_feedback" and line["error"] == "ProgrammingError"
    assert line["where"].startswith("feedback_insights.collector._store:")
    assert "Traceback" not in caplog.text and AGENT_WORDS not in caplog.text


def test_nothing_an_agent_wrote_reaches_the_log(server: RunningCollector, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        accepted(call(server, "submit_feedback", {**SUBMISSION, "message": f"very private {AGENT_WORDS}"}))
        refused(call(server, "submit_agent_feedback", {"summary": AGENT_WORDS, AGENT_WORDS: nested(70)}))
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "feedback_insights.collector"]
    assert [(line["method"], line["path"]) for line in lines if line["status"] == 200]
    assert {line["path"] for line in lines} == {"/mcp"}
    assert not [r for r in caplog.records if r.name.startswith("mcp")]  # the SDK's per-request chatter
    assert AGENT_WORDS not in caplog.text
