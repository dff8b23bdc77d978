"""Deletions at the collector reach the pipeline, and retries are rows of their own: a real
collector on 127.0.0.1, the real pipeline pulling from it, no mocks."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from feedback_insights.clusters import cluster_new_records
from feedback_insights.collector import Store
from feedback_insights.config import Config, HttpCollectorConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.core import SchemaSet, schemas_dir
from feedback_insights.ingest import CollectorClient, content_hash, ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .collector_server import (
    AGENT_KEY,
    HMAC_KEY,
    INGEST_KEY,
    OTHER_INGEST_KEY,
    PIPELINE_KEY,
    RunningCollector,
    running_collector,
)
from .test_collector import PIPE, SUBMISSION, post

INGEST = {"authorization": f"Bearer {INGEST_KEY}"}
OTHER = {"authorization": f"Bearer {OTHER_INGEST_KEY}"}
AGENT = {"authorization": f"Bearer {AGENT_KEY}"}
#: Planted in reports to find their bytes in the collector's files: no secret, so it is kept.
MARKER = "quokkalanternmarker"
KEPT = "wombatteapotmarker"
PAGE_SCHEMA = SchemaSet(schemas_dir() / "collector")
HIRING = [
    "No hiring role filter on /companies/search, so I cannot find companies hiring GTM engineers",
    "There is no way to filter /companies/search by hiring role; I wanted companies hiring sales engineers",
    "Filtering companies by open hiring role is impossible with /companies/search, no such filter parameter",
    "The /companies/search endpoint lacks a hiring role filter; searching companies that are hiring failed",
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningCollector]:
    with running_collector(tmp_path) as running:
        yield running


def record(record_id: str, received_at: str = "2026-11-02T10:00:00Z", account: str = "acct_svc_1",
           **feedback: Any) -> dict[str, Any]:
    """A record as a service forwards it (AFP §5.1)."""
    return {"id": record_id, "received_at": received_at, "service": "orbit-mcp", "account": account,
            "source": "sdk", "feedback": {**SUBMISSION, **feedback}}


def forward(server: RunningCollector, *records: dict[str, Any], headers: dict[str, str] = INGEST) -> list[dict[str, Any]]:
    answer = post(server, "/v1/records", {"records": list(records)}, **headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["results"])


def delete(server: RunningCollector, record_id: str, headers: dict[str, str] = INGEST) -> httpx.Response:
    """``DELETE /v1/records/{id}``, the id percent-encoded as any client must (``.`` too in an id
    that is only dots, which a client would otherwise resolve away as a path segment)."""
    encoded = "%2E" * len(record_id) if record_id in (".", "..") else quote(record_id, safe="")
    return httpx.delete(f"{server.url}/v1/records/{encoded}", headers=headers)


def tombstones(server: RunningCollector) -> list[str]:
    return [t["id"] for page in pages(server, 1000) for t in page["deleted"]]


def pages(server: RunningCollector, limit: int, after: str | None = None) -> list[dict[str, Any]]:
    """Every page from ``after`` on, each checked against records_page.schema.json."""
    found = []
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        while True:
            page = client.pull(after, limit)
            assert PAGE_SCHEMA.check("records_page.schema.json", page) == []
            assert len(page["records"]) + len(page["deleted"]) <= limit
            found.append(page)
            after = page["next_cursor"]
            if not page["has_more"]:
                return found


def entries(page: dict[str, Any]) -> list[tuple[str, str]]:
    """A page's entries: its records, then its tombstones (the order a consumer applies them)."""
    return [("record", r["id"]) for r in page["records"]] + [("deleted", t["id"]) for t in page["deleted"]]


def feed(server: RunningCollector, limit: int, after: str | None = None) -> list[tuple[str, str]]:
    return [entry for page in pages(server, limit, after) for entry in entries(page)]


def pipeline_config(tmp_path: Path, server: RunningCollector, monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.setenv("FI_DELETES_KEY", PIPELINE_KEY)
    return Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PrivacyConfig(hmac_key=HMAC_KEY),
        sources=[HttpCollectorConfig(kind="http", name="acme", url=server.url, key_env="FI_DELETES_KEY")],
    )


# -- DELETE /v1/records/{record_id} -----------------------------------------------------------


def test_delete_takes_an_ingest_or_the_pipeline_key_and_answers_404_for_an_unknown_id(
        server: RunningCollector) -> None:
    forward(server, record("fb_a"))
    for headers in ({}, AGENT, {"authorization": "Bearer wrong"}):
        refused = delete(server, "fb_a", headers)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["link"] == '</feedback>; rel="agent-feedback"'
    assert [r["id"] for r in pages(server, 10)[0]["records"]] == ["fb_a"]

    deleted = delete(server, "fb_a")
    assert deleted.status_code == 204 and deleted.content == b""
    for unknown, headers in (("fb_a", INGEST), ("fb_never_stored", INGEST), ("fb_never_stored", PIPE),
                             ("with space", INGEST), ("été", PIPE)):
        missing = delete(server, unknown, headers)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert missing.headers["link"] == '</feedback>; rel="agent-feedback"'
    for bad in ("x" * 129, ""):
        invalid = delete(server, bad)
        assert invalid.status_code == 400 and invalid.json()["error"]["details"][0]["path"] == "record_id"
    wrong_method = httpx.get(f"{server.url}/v1/records/fb_a", headers=INGEST)
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "DELETE"
    doc = httpx.get(server.url + "/openapi.json").json()
    (parameter,) = doc["paths"]["/v1/records/{record_id}"]["delete"]["parameters"]
    assert parameter["schema"]["pattern"] == "^[\\s\\S]{1,128}$" and "percent-encoded" in parameter["description"]
    body = doc["paths"]["/v1/records"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    # Stated in words: a record breaking it is rejected on its own, not the batch (AFP §5.1).
    assert "^[A-Za-z0-9][A-Za-z0-9._:~-]{0,127}$" in body["properties"]["records"]["items"]["description"]


# -- record ids: one charset, and DELETE reaches every id a store holds ----------------------


def test_a_record_id_outside_the_charset_is_rejected_naming_the_field(server: RunningCollector) -> None:
    bad = ["with space", "a/b", "a?b", "#x", "50%off", "été", "a\nb", "-lead", ".", "..", "x" * 129, ""]
    results = forward(server, *(record(i, session_id=f"s-bad-{n}") for n, i in enumerate(bad)))
    for result in results:
        assert result["status"] == "rejected", result
        assert [d["path"] for d in result["error"]["details"]] == ["id"], result
    assert server.collector.store.count() == 0
    good = ["A", "7", "fb_01JAX3ZK7Q8W2M4N6P9R", "svc:123", "a.b~c-d_e:f", "9" * 128]
    results = forward(server, *(record(i, session_id=f"s-good-{n}") for n, i in enumerate(good)))
    assert [(r["id"], r["status"]) for r in results] == [(i, "accepted") for i in good]
    for record_id in good:
        assert delete(server, record_id).status_code == 204, record_id
    assert tombstones(server) == good


def test_delete_reaches_every_id_a_store_holds_percent_encoded(server: RunningCollector) -> None:
    """A collector from before the id rule stored any 1 to 128 characters: the pipeline's key
    must still reach them, so the DELETE path takes any id, percent-encoded."""
    legacy = ["with space", "a/b", "x/", "50%off", "été", "a?b#c", "a\nb", "..", "z" * 128]
    for n, record_id in enumerate(legacy):
        server.collector.store.add(record(record_id, session_id=f"s-legacy-{n}"), None)
    for record_id in legacy:
        assert delete(server, record_id, PIPE).status_code == 204, record_id
        assert delete(server, record_id, PIPE).status_code == 404, record_id
    # The pipeline's deletions are erasures it made itself: no tombstone keeps their ids.
    assert tombstones(server) == [] and server.collector.store.count() == 0


# -- who may delete what ---------------------------------------------------------------------


def test_a_key_deletes_only_what_it_may(server: RunningCollector) -> None:
    """An ingest key deletes the records it forwarded; the pipeline's key any record (what
    ``forget`` needs); an agent's key none. Another's record is answered 404, as an unknown id is,
    so a key cannot learn which ids others hold; nothing is deleted."""
    forward(server, record("fb_mine", session_id="s-mine"))
    forward(server, record("fb_theirs", session_id="s-theirs"), headers=OTHER)
    agent = post(server, "/feedback", {**SUBMISSION, "session_id": "s-agent"}, **AGENT).json()["id"]
    assert post(server, "/feedback", {**SUBMISSION, "session_id": "s-agent"}).json()["id"] == agent  # a retry
    anonymous = post(server, "/feedback", {**SUBMISSION, "session_id": "s-anon"}).json()["id"]
    for target, headers in (("fb_theirs", INGEST), (agent, INGEST), (anonymous, INGEST), ("fb_mine", OTHER),
                            (agent, OTHER)):
        refused = delete(server, target, headers)
        assert refused.status_code == 404 and refused.json()["error"]["message"] == f"No record {target}"
    assert delete(server, agent, AGENT).status_code == 401
    assert server.collector.store.count() == 5 and tombstones(server) == []

    assert delete(server, "fb_mine").status_code == 204
    assert delete(server, "fb_theirs", OTHER).status_code == 204
    assert delete(server, agent, PIPE).status_code == 204  # and its retry with it
    assert delete(server, anonymous, PIPE).status_code == 204
    # A service's deletions are told to the pipeline; the pipeline's own (an erasure) leave no id.
    assert tombstones(server) == ["fb_mine", "fb_theirs"]
    assert server.collector.store.count() == 0


def test_deleting_a_record_leaves_the_retries_another_key_forwarded(server: RunningCollector) -> None:
    forward(server, record("fb_first", session_id="s-shared"), record("fb_own_retry", session_id="s-shared"))
    answered = forward(server, record("fb_their_retry", session_id="s-shared"),
                       record("fb_their_retry_2", session_id="s-shared"), headers=OTHER)
    assert [(r["id"], r["status"]) for r in answered] == [("fb_first", "duplicate")] * 2

    assert delete(server, "fb_first").status_code == 204
    assert tombstones(server) == ["fb_first", "fb_own_retry"]
    # The earliest retry left is now the first report; a later retry is answered with it.
    kept = {r["id"]: r.get("duplicate_of") for page in pages(server, 1000) for r in page["records"]}
    assert kept == {"fb_their_retry": None, "fb_their_retry_2": "fb_their_retry"}
    assert forward(server, record("fb_later", session_id="s-shared")) == [{"id": "fb_their_retry",
                                                                          "status": "duplicate"}]
    assert delete(server, "fb_their_retry", OTHER).status_code == 204
    assert tombstones(server)[2:] == ["fb_their_retry", "fb_their_retry_2"]
    assert [r["id"] for page in pages(server, 1000) for r in page["records"]] == ["fb_later"]


# -- a known id with other content -------------------------------------------------------------


def test_a_known_id_with_other_content_is_409_naming_both_hashes_and_nothing_is_stored(
        server: RunningCollector) -> None:
    forward(server, record("fb_x", session_id="s-x"))
    (stored,) = [r for page in pages(server, 10) for r in page["records"]]
    assert forward(server, record("fb_x", session_id="s-x")) == [{"id": "fb_x", "status": "duplicate"}]
    assert forward(server, record("fb_x", session_id="s-x"), headers=OTHER)[0]["status"] == "duplicate"

    other = {**record("fb_x", session_id="s-x", message="Another report entirely"), "service": "billing-api"}
    for batch, position in (([record("fb_new", session_id="s-new"), other], 1),
                            ([record("fb_y", session_id="s-y"), record("fb_y", session_id="s-y", goal="else")], 1)):
        answer = post(server, "/v1/records", {"records": batch}, **INGEST)
        assert answer.status_code == 409 and answer.headers["link"] == '</feedback>; rel="agent-feedback"'
        failure = answer.json()["error"]
        assert failure["code"] == "conflict"
        (detail,) = failure["details"]
        assert detail["path"] == f"records.{position}.id" and detail["stored_hash"] != detail["new_hash"]
        assert detail["stored_hash"] in failure["message"] and detail["new_hash"] in failure["message"]
    # Nothing of a refused batch is stored: fb_new and fb_y are not, fb_x is as it was.
    assert [r for page in pages(server, 10) for r in page["records"]] == [stored]

    first_answer = post(server, "/v1/records", {"records": [other]}, **INGEST).json()["error"]["details"][0]
    assert first_answer["stored_hash"] == content_hash(stored)
    # The new hash is the content hash of the record as it would be stored.
    assert delete(server, "fb_x").status_code == 204
    assert forward(server, other)[0]["status"] == "accepted"
    (replacement,) = [r for page in pages(server, 10) for r in page["records"]]
    assert replacement["service"] == "billing-api" and content_hash(replacement) == first_answer["new_hash"]


#: Every file SQLite keeps beside a database: its write-ahead log, the log's shared-memory
#: index, a rollback journal.
COMPANIONS = ("-wal", "-shm", "-journal")


def store_files(db: Path) -> dict[str, bytes]:
    """The database file (free pages included) and every companion file, as they are on disk."""
    paths = [db, *(db.with_name(db.name + suffix) for suffix in COMPANIONS)]
    return {path.name: path.read_bytes() for path in paths if path.exists()}


def file_bytes(db: Path) -> bytes:
    return b"".join(store_files(db).values())


#: A collector process that deletes a report and is killed at once, before its checkpointer
#: (once a second) has truncated the log: the log still holds the report's pages as written.
_KILLED_AFTER_A_DELETE = f"""
import os, signal, sys
from feedback_insights.collector import Store
store = Store(sys.argv[1])
for i in range(20):
    store.add({{"id": f"fb_kept_{{i}}", "received_at": "2026-11-02T10:00:00Z",
               "feedback": {{"message": "Slow {KEPT} search " * 20}}}}, None)
store.add({{"id": "fb_gone", "received_at": "2026-11-02T10:00:00Z",
           "feedback": {{"message": "No hiring-role filter. " * 150 + "{MARKER}"}}}}, "key-gone")
assert store.delete("fb_gone", "2026-11-02T10:01:00Z", by=None) == ["fb_gone"]
os.kill(os.getpid(), signal.SIGKILL)
"""


def wait_for(condition: Callable[[], bool], seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_a_deleted_record_and_its_retries_leave_no_byte_in_the_sqlite_file(server: RunningCollector) -> None:
    for i in range(20):
        post(server, "/feedback", {**SUBMISSION, "session_id": f"s-kept-{i}", "message": f"Slow {KEPT} search"})
    # Long enough to spill into overflow pages, with the marker on the last of them.
    long = {**SUBMISSION, "session_id": "s-secret", "goal": f"Find {MARKER} companies",
            "message": "No hiring-role filter. " * 150 + MARKER}
    first = post(server, "/feedback", long, **AGENT).json()["id"]
    assert post(server, "/feedback", long, **AGENT).json()["id"] == first  # a retry: a row of its own
    # The collector's checkpointer copies the log into the database every second; the log
    # keeps the pages as they were written.
    wal = server.db.with_name(server.db.name + "-wal")
    assert wait_for(lambda: MARKER.encode() in server.db.read_bytes())
    assert MARKER.encode() in wal.read_bytes()

    assert delete(server, first, PIPE).status_code == 204  # an agent's report: the pipeline's to delete
    assert wait_for(lambda: MARKER.encode() not in file_bytes(server.db))
    assert KEPT.encode() in file_bytes(server.db)
    (page,) = pages(server, 100)
    assert MARKER not in json.dumps(page)
    assert page["deleted"] == []  # the pipeline erased it itself: no tombstone keeps its id


def test_a_store_reopened_after_a_crash_clears_the_deleted_report_from_its_log_at_once(tmp_path: Path) -> None:
    db = tmp_path / "collector.sqlite"
    killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER_A_DELETE, str(db)], capture_output=True, timeout=60)
    assert killed.returncode == -9, killed.stderr.decode()
    # The positive control: the deletion was answered, and the log holds the report all the same.
    left = {name for name, data in store_files(db).items() if MARKER.encode() in data}
    assert left == {"collector.sqlite-wal"}

    store = Store(db)
    try:
        assert {name: MARKER.encode() in data for name, data in store_files(db).items()} == {
            "collector.sqlite": False, "collector.sqlite-wal": False, "collector.sqlite-shm": False}
        assert KEPT.encode() in file_bytes(db) and store.count() == 20
        page = store.page(0, 100)
        assert page.deleted == []  # the pipeline's erasure: no tombstone
        assert MARKER not in json.dumps(page.records)
    finally:
        store.close()


# -- tombstones in the pull feed --------------------------------------------------------------


def test_tombstones_come_in_commit_order_across_pages_and_a_later_pull_still_learns_of_them(
        server: RunningCollector) -> None:
    forward(server, *(record(f"fb_{name}", session_id=f"s-{name}") for name in "abc"))
    first_page = pages(server, 2)[0]
    assert entries(first_page) == [("record", "fb_a"), ("record", "fb_b")]
    assert delete(server, "fb_b").status_code == 204
    forward(server, record("fb_d", session_id="s-d"))
    assert delete(server, "fb_a").status_code == 204
    forward(server, record("fb_e", session_id="s-e"))
    forward(server, record("fb_b", session_id="s-b2", message="Sent again after its deletion"))

    in_order = [("record", "fb_c"), ("deleted", "fb_b"), ("record", "fb_d"), ("deleted", "fb_a"),
                ("record", "fb_e"), ("record", "fb_b")]
    assert feed(server, 1) == in_order
    # The pipeline that pulled the first page learns of both deletions, each once.
    assert feed(server, 2, first_page["next_cursor"]) == in_order
    # A page never holds a record that was deleted earlier on it: storing a page's records and
    # then applying its deletions is always right.
    assert [entries(page) for page in pages(server, 10)] == [
        [("record", "fb_c"), ("record", "fb_d"), ("record", "fb_e"), ("deleted", "fb_b"), ("deleted", "fb_a")],
        [("record", "fb_b")]]
    tombstone = pages(server, 10)[0]["deleted"][0]
    assert set(tombstone) == {"id", "deleted_at"} and tombstone["deleted_at"].endswith("Z")
    empty = httpx.get(server.url + "/v1/records", params={"after": pages(server, 10)[-1]["next_cursor"]},
                      headers=PIPE).json()
    assert (empty["records"], empty["deleted"], empty["has_more"]) == ([], [], False)


def test_pulling_while_records_are_written_and_deleted_misses_and_repeats_nothing(
        server: RunningCollector) -> None:
    created = [f"fb_w{i}" for i in range(60)]
    removed = created[::3]

    def write() -> None:
        for i, record_id in enumerate(created):
            forward(server, record(record_id, session_id=f"w{i}"))
            if i % 3 == 2:
                assert delete(server, created[i - 2]).status_code == 204

    writer = threading.Thread(target=write)
    writer.start()
    seen: list[tuple[str, str]] = []
    after = None
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        while writer.is_alive() or after is None:
            page = client.pull(after, 3)
            seen += entries(page)
            after = page["next_cursor"]
        writer.join()
        while (page := client.pull(after, 3))["records"] or page["deleted"]:
            seen += entries(page)
            after = page["next_cursor"]
    assert len(seen) == len(set(seen))
    assert sorted(i for kind, i in seen if kind == "deleted") == sorted(removed)
    assert {i for _, i in seen} == set(created)
    for record_id in removed:  # a record the pipeline saw comes before its tombstone
        if ("record", record_id) in seen:
            assert seen.index(("record", record_id)) < seen.index(("deleted", record_id))


def test_known_issues_drop_a_deleted_record_id(server: RunningCollector) -> None:
    forward(server, record("fb_a"))
    issue = {"id": "iss_1", "title": "Hiring-role filter", "status": "planned"}
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        client.put_known_issue(issue, {"record_ids": ["fb_a", "fb_elsewhere"], "fingerprints": []})
    assert delete(server, "fb_a").status_code == 204
    (listed,) = httpx.get(server.url + "/v1/known-issues", headers=PIPE).json()["known_issues"]
    assert listed["match"]["record_ids"] == ["fb_elsewhere"]


# -- what the pipeline erased is not stored again ---------------------------------------------

ERASED_TEXT = "No hiring-role filter. " * 150 + MARKER


def erased_marks(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT kind, mark FROM erased ORDER BY kind, mark").fetchall()
    con.close()
    return rows


def test_a_report_the_pipeline_erased_is_not_stored_again_and_no_byte_of_it_reaches_the_file(
        server: RunningCollector) -> None:
    """``forget`` deletes with the pipeline's key; the service still holds the record and sends it
    again. It is refused (rejected, code erased), under its id or a new one from the same account,
    and nothing of it is written: not in the database, its log or the log's index. The same text
    from another account is another person's report, and is stored."""
    erased = record("fb_erased", session_id="s-erased", message=ERASED_TEXT)
    forward(server, erased, *(record(f"fb_kept_{i}", session_id=f"s-kept-{i}", message=f"Slow {KEPT} search")
                              for i in range(5)))
    assert wait_for(lambda: MARKER.encode() in server.db.read_bytes())
    assert delete(server, "fb_erased", PIPE).status_code == 204
    assert wait_for(lambda: MARKER.encode() not in file_bytes(server.db))

    again = forward(server, erased, {**erased, "id": "fb_erased_new_id"}, record("fb_fresh", session_id="s-fresh"))
    for answer, record_id in zip(again[:2], ("fb_erased", "fb_erased_new_id"), strict=True):
        assert answer["id"] == record_id and answer["status"] == "rejected"
        assert answer["error"]["code"] == "erased" and "erased at its owner's request" in answer["error"]["message"]
        assert "known_issue" not in answer
    assert again[2] == {"id": "fb_fresh", "status": "accepted"}
    # Straight after the answer and after the checkpointer's next turns alike.
    assert MARKER.encode() not in file_bytes(server.db)
    time.sleep(2.5)
    assert set(store_files(server.db)) >= {"collector.sqlite", "collector.sqlite-wal", "collector.sqlite-shm"}
    for name, content in store_files(server.db).items():
        assert MARKER.encode() not in content, name
    assert KEPT.encode() in file_bytes(server.db)
    stored = [r["id"] for page in pages(server, 100) for r in page["records"]]
    assert "fb_erased" not in stored and "fb_erased_new_id" not in stored and "fb_fresh" in stored

    # Another account's report with the same text, under another id: stored.
    theirs = record("fb_same_text_other_account", account="acct_svc_2", session_id="s-erased", message=ERASED_TEXT)
    assert forward(server, theirs) == [{"id": "fb_same_text_other_account", "status": "accepted"}]
    assert wait_for(lambda: MARKER.encode() in file_bytes(server.db))


def test_only_the_pipeline_s_erasure_is_remembered_a_service_may_send_its_own_deleted_record_again(
        server: RunningCollector) -> None:
    """A service deleting its own record (its ingest key) may send it again: it is stored anew.
    What the pipeline's key deleted (an erasure at a person's request) is not."""
    own = record("fb_own", session_id="s-own", message="Own deletion, sent again")
    forward(server, own)
    assert delete(server, "fb_own").status_code == 204
    assert forward(server, own) == [{"id": "fb_own", "status": "accepted"}]
    assert erased_marks(server.db) == []

    assert delete(server, "fb_own", PIPE).status_code == 204
    assert forward(server, own)[0]["status"] == "rejected"
    assert server.collector.store.count() == 0


def test_an_agent_s_report_erased_by_the_pipeline_is_refused_when_the_agent_sends_it_again(
        server: RunningCollector) -> None:
    """The agents' doors mint a new id for every report, so only the content mark can match: the
    same account sending the same report again is told it was erased (409, code erased), over
    HTTP and over MCP alike; the same report from another account (here anonymous) is stored."""
    report = {**SUBMISSION, "session_id": "s-agent-erased", "message": ERASED_TEXT}
    first = post(server, "/feedback", report, **AGENT)
    assert first.status_code == 202
    assert delete(server, first.json()["id"], PIPE).status_code == 204
    assert wait_for(lambda: MARKER.encode() not in file_bytes(server.db))

    refused = post(server, "/feedback", report, **AGENT)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "erased"
    assert refused.headers["link"] == '</feedback>; rel="agent-feedback"'
    time.sleep(1.5)
    assert MARKER.encode() not in file_bytes(server.db) and server.collector.store.count() == 0

    assert post(server, "/feedback", report).status_code == 202  # anonymous: another account
    assert server.collector.store.count() == 1


def test_the_erasure_marks_are_keyed_hmacs_of_id_and_of_account_and_content(server: RunningCollector) -> None:
    """The ledger holds no id, account or text, nor a plain hash of one that could be reversed
    by trying short ids: HMAC-SHA256 with the collector's pseudonymisation key, one mark of the
    id and one of the account and content, for the report and each of its retries."""
    forward(server, record("fb_marked", session_id="s-marked"), record("fb_marked_retry", session_id="s-marked"))
    assert delete(server, "fb_marked", PIPE).status_code == 204
    marks = erased_marks(server.db)
    assert [kind for kind, _ in marks] == ["content", "id", "id"]  # the retry's content is the same
    plain = {hashlib.sha256(value.encode()).hexdigest() for value in ("fb_marked", "fb_marked_retry")}
    for _, mark in marks:
        assert len(mark) == 64 and int(mark, 16) >= 0 and mark not in plain
    with sqlite3.connect(server.db) as con:
        dump = "\n".join(con.iterdump())
    con.close()
    erased_rows = [line for line in dump.splitlines() if line.startswith('INSERT INTO "erased"')]
    assert len(erased_rows) == 3
    assert not any(word in line for line in erased_rows for word in ("fb_marked", "acct_", "hiring", HMAC_KEY))


# -- retries are rows -------------------------------------------------------------------------


def retries_everywhere(server: RunningCollector) -> dict[str, str]:
    """Every kind of retry the collector takes; returns each retry's first report's id, by the
    agent or service that sent it."""
    first = post(server, "/feedback", SUBMISSION, **AGENT).json()["id"]
    assert post(server, "/feedback", SUBMISSION, **AGENT).json()["id"] == first
    assert post(server, "/feedback", SUBMISSION).json()["id"] == first  # anonymous: AFP's "same session and content"
    token = "sk-proj-" + "a1B2" * 12
    leaky = post(server, "/feedback", {**SUBMISSION, "session_id": "s-leak", "message": f"{token} is refused"}).json()["id"]
    other_token = "sk-proj-" + "c3D4" * 12  # the same report once scrubbed: what the warehouse compares
    assert post(server, "/feedback", {**SUBMISSION, "session_id": "s-leak", "message": f"{other_token} is refused"}
                ).json()["id"] == leaky
    # A service's retry may say it was received before the first report; it is still the retry.
    results = forward(server, record("fb_svc_first", "2026-11-02T10:00:05Z", session_id="s-svc"),
                      record("fb_svc_retry", "2026-11-02T10:00:01Z", account="acct_svc_2", session_id="s-svc"),
                      record("fb_svc_first", "2026-11-02T10:00:05Z", session_id="s-svc"))
    assert [(r["id"], r["status"]) for r in results] == [
        ("fb_svc_first", "accepted"), ("fb_svc_first", "duplicate"), ("fb_svc_first", "duplicate")]
    return {"agent": first, "leak": leaky, "service": "fb_svc_first"}


def test_retries_are_rows_served_with_duplicate_of_and_answered_with_the_first_id(
        server: RunningCollector) -> None:
    firsts = retries_everywhere(server)
    found = pages(server, 1000)
    served = [r for page in found for r in page["records"]]
    assert len(served) == 7  # 3 first reports, 4 retries; the re-delivered record is not stored again
    retries = {r["id"]: r["duplicate_of"] for r in served if "duplicate_of" in r}
    assert sorted(retries.values()) == sorted([firsts["agent"]] * 2 + [firsts["leak"]] + [firsts["service"]])
    assert len(retries) == 4 and not set(retries) & set(firsts.values())  # ids of their own
    assert all(r["id"].startswith("fb_") and r["received_at"] for r in served)
    # A page never holds a retry together with its first report: the report is stored first.
    for page in found:
        ids = {r["id"] for r in page["records"]}
        assert not {r.get("duplicate_of") for r in page["records"]} & ids


def test_pulled_retries_are_retries_in_the_warehouse(tmp_path: Path, server: RunningCollector,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    retries_everywhere(server)
    served = {r["id"]: r.get("duplicate_of") for page in pages(server, 1000) for r in page["records"]}
    config = pipeline_config(tmp_path, server, monkeypatch)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        stored = dict(wh.con.execute("SELECT id, duplicate_of FROM records").fetchall())
        originals = wh.con.execute("SELECT count(*) FROM records WHERE original LIKE '%duplicate_of%'").fetchone()
    assert summary.errors == [] and (summary.counts.new, summary.counts.retries) == (7, 4)
    assert stored == served
    assert originals == (0,)  # the original is the envelope as received, as for a first report


def test_a_pipeline_pulling_forgets_deleted_records_everywhere(tmp_path: Path, server: RunningCollector,
                                                               monkeypatch: pytest.MonkeyPatch, embedder) -> None:
    for i, message in enumerate(HIRING):
        forward(server, record(f"fb_h{i}", account=f"acct_h{i}", session_id=f"h{i}", message=message))
    forward(server, record("fb_h0_retry", session_id="h0", message=HIRING[0]))  # fb_h0's retry
    config = pipeline_config(tmp_path, server, monkeypatch)
    gone = ["fb_h0", "fb_h0_retry"]

    def held(wh: Warehouse) -> dict[str, int]:
        tables = {"records": "records", "signals": "record_signals", "members": "cluster_members"}
        counts = {name: wh.con.execute(f"SELECT count(*) FROM {table} WHERE id IN (SELECT unnest(?))",
                                       [gone]).fetchone()[0] for name, table in tables.items()}
        counts["embeddings"] = wh.con.execute(
            "SELECT count(*) FROM embeddings WHERE text_sha256 IN (SELECT text_sha256 FROM cluster_members "
            "WHERE view = 'reports' AND id = 'fb_h1')").fetchone()[0]
        return counts

    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).counts.retries == 1
        score_new_records(wh)
        cluster_new_records(wh, embedder)
        texts = [row[0] for row in wh.con.execute(
            "SELECT DISTINCT text_sha256 FROM cluster_members WHERE view = 'reports' AND id IN (SELECT unnest(?))",
            [gone]).fetchall()]
        assert texts and wh.con.execute("SELECT count(*) FROM embeddings WHERE text_sha256 IN (SELECT unnest(?))",
                                        [texts]).fetchone()[0] == len(texts)
        before = held(wh)
        assert before["records"] == 2 and before["signals"] == 2 and before["members"] >= 1

        assert delete(server, "fb_h0").status_code == 204  # the report, and its retry with it
        summary = ingest(config, wh)
        assert summary.errors == [] and summary.forgotten == 2
        after = held(wh)
        assert (after["records"], after["signals"], after["members"]) == (0, 0, 0)
        assert wh.con.execute("SELECT count(*) FROM embeddings WHERE text_sha256 IN (SELECT unnest(?))",
                              [texts]).fetchone()[0] == 0
        assert after["embeddings"] == before["embeddings"] > 0  # the others' are kept
        assert wh.con.execute("SELECT count(*) FROM records").fetchone()[0] == 3
        assert ingest(config, wh).forgotten == 0  # the tombstones were consumed with the cursor


# -- a collector file from before retries were rows --------------------------------------------

_OLD_SCHEMA = """
CREATE TABLE records (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    received_at TEXT NOT NULL,
    dedupe_key  TEXT,
    body        TEXT NOT NULL
);
CREATE UNIQUE INDEX records_dedupe ON records (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE TABLE known_issues (id TEXT PRIMARY KEY, body TEXT NOT NULL, match TEXT NOT NULL, updated_at TEXT NOT NULL);
"""


def test_a_collector_file_from_before_retries_were_rows_is_upgraded(tmp_path: Path) -> None:
    envelope = {"id": "fb_old", "received_at": "2026-10-01T10:00:00.000Z", "source": "http",
                "service": "acme-companies-api", "account": "acct_someone", "feedback": SUBMISSION}
    old_key = content_hash([envelope["service"], "customer-0", SUBMISSION["session_id"], SUBMISSION])
    with sqlite3.connect(tmp_path / "collector.sqlite") as con:
        con.executescript(_OLD_SCHEMA)
        con.execute("INSERT INTO records (id, received_at, dedupe_key, body) VALUES (?, ?, ?, ?)",
                    ["fb_old", envelope["received_at"], old_key, json.dumps(envelope)])
    con.close()
    with running_collector(tmp_path) as server:
        # The same report from another account is a retry of it, as the warehouse will say.
        assert post(server, "/feedback", SUBMISSION, **AGENT).json()["id"] == "fb_old"
        first, retry = [r for page in pages(server, 10) for r in page["records"]]
        assert first["id"] == "fb_old" and "duplicate_of" not in first
        assert retry["duplicate_of"] == "fb_old"
        # Whose its records were, a file from before owners were kept does not say: the pipeline's.
        assert delete(server, "fb_old").status_code == 404
        assert delete(server, "fb_old", PIPE).status_code == 204
        assert [t["id"] for page in pages(server, 10) for t in page["deleted"]] == []  # an erasure: no tombstone
