"""Known issues recognised by meaning: the representation the pipeline publishes with a filed
problem, the collector telling reworded reports of it "known issue" over HTTP and MCP, and the
desk's lookalikes by the same measure."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from feedback_insights.clusters import members_model, text_sql, to_matrix
from feedback_insights.collector._embedder import MAX_TEXT, bounded
from feedback_insights.collector._matching import fingerprint_matches
from feedback_insights.config import (
    Config,
    EmbeddingConfig,
    HttpCollectorConfig,
    PrivacyConfig,
    WarehouseConfig,
    embedded_default,
)
from feedback_insights.core import TEXT_FIELDS
from feedback_insights.drafts import Meaning, draft_clusters, lookalikes, split_cluster
from feedback_insights.ingest import CollectorClient, dialects, ingest
from feedback_insights.ingest.dialects import Origin
from feedback_insights.publish import payloads
from feedback_insights.warehouse import Warehouse

from .collector_server import INGEST_KEY, PIPELINE_KEY, RunningCollector, running_collector
from .conftest import REPO, SAMPLE, sample_copy
from .test_collector_mcp import accepted, call


@pytest.fixture(scope="module")
def drafted(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The clustered sample drafted once: its pags-console clusters holding a report filed by
    hand are attached to those issues (filed), the others wait for review."""
    path = sample_copy(clustered_sample, tmp_path_factory.mktemp("drafted"))
    with Warehouse(path) as wh:
        draft_clusters(embedded_default(path), wh)
    return path


def _copy(path: Path, folder: Path) -> Path:
    shutil.copyfile(path, folder / "feedback.duckdb")
    return folder / "feedback.duckdb"


def _members(wh: Warehouse, cluster: int) -> list[str]:
    rows = wh.con.execute("SELECT collector || ':' || id FROM cluster_members WHERE view = 'reports' AND cluster_id = ? "
                          "ORDER BY collector, id", [cluster]).fetchall()
    return [r[0] for r in rows]


def test_reports_split_off_a_filed_problem_look_like_it(drafted: Path, tmp_path: Path) -> None:
    path = _copy(drafted, tmp_path)
    config = embedded_default(path)
    with Warehouse(path) as wh:
        filed = wh.con.sql("""SELECT d.cluster_id, d.issue_url, count(*) AS n FROM drafts d
                              JOIN cluster_members m ON m.cluster_id = d.cluster_id AND m.view = 'reports'
                              WHERE d.status = 'filed' GROUP BY ALL ORDER BY n DESC, d.cluster_id LIMIT 1""").fetchall()
        cluster, url, _ = filed[0]
        before = lookalikes(wh, config)
        assert cluster not in before  # a filed cluster is no lookalike of anything: it is filed
        members = _members(wh, cluster)
        half = members[: len(members) // 2]
        new = split_cluster(config, wh, cluster, half, "maria").new_cluster
        assert new is not None
        found = lookalikes(wh, config)
    like = found[new][0]
    assert (like.cluster_id, like.issue_url) == (cluster, url)
    assert like.reports == len(half) and like.told >= 0.8 * len(half) and like.share == like.told / like.reports
    assert set(like.examples) <= set(half) and 1 <= len(like.examples) <= 3
    assert like.similarity >= config.embedding.known_issue_similarity


def test_a_cluster_looks_like_filed_problems_of_its_own_service_only(drafted: Path, tmp_path: Path) -> None:
    path = _copy(drafted, tmp_path)
    config = embedded_default(path)
    with Warehouse(path) as wh:
        service = dict(wh.con.execute("SELECT id, service FROM clusters").fetchall())
        filed = {r[0] for r in wh.con.execute("SELECT cluster_id FROM drafts WHERE status = 'filed'").fetchall()}
        found = lookalikes(wh, config)
        assert found and not set(found) & filed
        for cluster, likes in found.items():
            assert all(service[like.cluster_id] == service[cluster] for like in likes)
            assert all(set(like.examples) <= set(_members(wh, cluster)) for like in likes)
        # A filed problem of another service is never a lookalike, however close its reports.
        wh.con.execute("UPDATE clusters SET service = 'elsewhere' WHERE id IN (SELECT cluster_id FROM drafts WHERE status = 'filed')")
        assert lookalikes(wh, config) == {}


# -- the collector: matching by meaning over HTTP and MCP ---------------------------------------

REWORDED = REPO / "benchmarks" / "data" / "reworded"
HIRING = "acme.hiring_role_filter"
PIPE = {"authorization": f"Bearer {PIPELINE_KEY}"}


def _reworded(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (REWORDED / f"{name}.jsonl").read_text().splitlines()]


def _truth_cluster(wh: Warehouse, problem: str) -> int:
    """The cluster holding most of a planted problem's reports (data/sample/truth.jsonl)."""
    ids = [row["record_id"] for row in map(json.loads, (SAMPLE / "truth.jsonl").read_text().splitlines())
           if row.get("problem") == problem and row.get("record_id")]
    return wh.con.execute("""SELECT cluster_id FROM cluster_members WHERE view = 'reports' AND list_contains(?, id)
                             AND cluster_id IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1""", [ids]).fetchall()[0][0]


@pytest.fixture(scope="module")
def filed_hiring(drafted: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The known issue the pipeline publishes once the sample's hiring-filter cluster is filed:
    its known_issue object and match, as ``payloads`` builds them for the collector "sample"."""
    path = _copy(drafted, tmp_path_factory.mktemp("filed"))
    config = embedded_default(path).model_copy(update={"sources": [
        HttpCollectorConfig(kind="http", name="sample", url="http://127.0.0.1:9", key_env="FI_UNUSED")]})
    with Warehouse(path) as wh:
        cluster = _truth_cluster(wh, HIRING)
        wh.con.execute("""UPDATE drafts SET status = 'filed', issue_number = 503,
                          issue_url = 'https://github.com/acme/companies-api/issues/503' WHERE cluster_id = ?""", [cluster])
        (draft_id,) = wh.con.execute("SELECT id FROM drafts WHERE cluster_id = ?", [cluster]).fetchall()[0]
        (_, _, issue, match), = [p for p in payloads(config, wh) if p[0] == draft_id]
        model = members_model(wh.con, "reports")
        vectors = wh.con.sql("""SELECT e.vector FROM cluster_members m JOIN embeddings e ON e.model = $model
                                AND e.text_sha256 = m.text_sha256 WHERE m.view = 'reports' AND m.cluster_id = $cluster""",
                             params={"model": model, "cluster": cluster}).to_arrow_table()
    expected = Meaning.of_members(model, to_matrix(vectors.column("vector")), config.embedding.known_issue_similarity)
    meaning = match["meaning"]
    assert meaning["model"] == model and meaning["service"] == "acme-companies-api"
    assert meaning["threshold"] == config.embedding.known_issue_similarity
    assert np.allclose(meaning["centroid"], expected.centroid, atol=1e-5)
    return issue, match


def _put(server: RunningCollector, issue: dict[str, Any], match: dict[str, Any]) -> None:
    with CollectorClient(server.url, PIPELINE_KEY) as client:
        client.put_known_issue(issue, match)


def _post(server: RunningCollector, feedback: dict[str, Any], session: str) -> dict[str, Any]:
    answer = httpx.post(server.url + "/feedback", json={**feedback, "session_id": session}, timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()


def _by_terms(match: dict[str, Any], feedback: dict[str, Any]) -> bool:
    """Whether today's whole-word term matching alone would tell this report."""
    record = _canonical(feedback)
    text = "\n".join(str(record.get(f) or "") for f in TEXT_FIELDS).lower()
    return any(fingerprint_matches(f, record, text) for f in match["fingerprints"])


def _canonical(feedback: dict[str, Any]) -> dict[str, Any]:
    envelope = {"id": "fb_x", "received_at": "2026-12-01T00:00:00Z", "source": "http", "service": "acme-companies-api",
                "feedback": feedback}
    return dict(dialects.dialect("afp").normalise(envelope, Origin("collector", envelope["received_at"]))[0])


def test_reworded_reports_of_a_filed_problem_are_told_it_is_known_and_others_are_not(
        tmp_path: Path, filed_hiring: tuple[dict[str, Any], dict[str, Any]]) -> None:
    issue, match = filed_hiring
    reworded = [row["feedback"] for row in _reworded(HIRING)]
    same_endpoint = [row["feedback"] for row in _reworded("others") if row["near"] == HIRING]
    with running_collector(tmp_path) as server:
        _put(server, issue, match)
        told = [_post(server, feedback, f"r{i}").get("known_issue") for i, feedback in enumerate(reworded)]
        others = [_post(server, feedback, f"o{i}").get("known_issue") for i, feedback in enumerate(same_endpoint)]
    assert all(known in (None, issue) for known in told)
    assert sum(known == issue for known in told) >= 0.8 * len(reworded)
    # Whole words alone would have missed most of them ("recruiting", "vacancies", "unfiltered").
    assert sum(_by_terms(match, feedback) for feedback in reworded) < 0.5 * len(reworded)
    assert sum(known is not None for known in others) <= 1  # other problems of /companies/search


def test_mcp_tools_and_every_http_door_are_told_by_meaning_alike(
        tmp_path: Path, filed_hiring: tuple[dict[str, Any], dict[str, Any]]) -> None:
    issue, match = filed_hiring
    afp = {"type": "missing_capability", "goal": "Shortlist logistics firms with open driver roles",
           "endpoint": "/companies/search", "method": "GET", "outcome": "blocked", "session_id": "m1",
           "message": "Company search lacks a way to select companies by the positions they are recruiting for."}
    afs = {"tool_name": "/companies/search", "category": "missing_capability",
           "summary": "Cannot restrict company search results to employers with open vacancies for a role"}
    with running_collector(tmp_path) as server:
        _put(server, issue, match)
        assert not _by_terms(match, afp)
        assert accepted(call(server, "submit_feedback", afp))["known_issue"] == issue
        assert accepted(call(server, "submit_agent_feedback", afs))["known_issue"] == issue
        assert _post(server, afp, "h1")["known_issue"] == issue
        over_http = httpx.post(server.url + "/api/v1/feedback", json=afs, timeout=30)
        assert over_http.status_code == 202 and over_http.json()["known_issue"] == issue
        slow = accepted(call(server, "submit_feedback", {**afp, "session_id": "m2",
                                                         "message": "Company search takes ten seconds per page."}))
        assert "known_issue" not in slow


def test_a_listed_record_id_wins_and_another_service_is_never_told(
        tmp_path: Path, filed_hiring: tuple[dict[str, Any], dict[str, Any]]) -> None:
    issue, match = filed_hiring
    report = _reworded(HIRING)[0]["feedback"]
    with running_collector(tmp_path) as server:
        first = _post(server, report, "s1")
        other = {"id": "iss_other", "title": "Another issue", "status": "planned"}
        _put(server, other, {"record_ids": [first["id"]]})
        _put(server, issue, match)
        assert _post(server, report, "s1")["known_issue"] == other  # a retry of the listed report
        assert _post(server, report, "s2")["known_issue"] == issue  # the same words, a report of its own
        forwarded = {"id": "fb_orbit_1", "received_at": "2026-12-01T10:00:00Z", "service": "orbit-mcp",
                     "feedback": {**report, "session_id": "s3"}}
        answer = httpx.post(server.url + "/v1/records", json={"records": [forwarded]},
                            headers={"authorization": f"Bearer {INGEST_KEY}"}).json()
        assert answer["results"] == [{"id": "fb_orbit_1", "status": "accepted"}]  # orbit-mcp has no such issue


def test_without_its_model_a_collector_matches_by_terms_and_says_so_once(
        tmp_path: Path, filed_hiring: tuple[dict[str, Any], dict[str, Any]], caplog: pytest.LogCaptureFixture) -> None:
    issue, match = filed_hiring
    (tmp_path / "not-a-folder").write_text("")  # the model cannot be exported there
    broken = EmbeddingConfig(onnx_cache=tmp_path / "not-a-folder", threads=3)
    by_meaning_only = _reworded(HIRING)[0]["feedback"]
    by_terms = {**by_meaning_only, "message": "Companies with open roles cannot be found: no hiring filter on search"}
    assert _by_terms(match, by_terms) and not _by_terms(match, by_meaning_only)
    with caplog.at_level(logging.WARNING, "feedback_insights.collector"), running_collector(tmp_path, broken) as server:
        _put(server, issue, match)
        assert _post(server, by_terms, "t1")["known_issue"] == issue
        assert "known_issue" not in _post(server, by_meaning_only, "t2")
        assert "known_issue" not in _post(server, by_meaning_only, "t3")
    said = [r.getMessage() for r in caplog.records if "key terms only" in r.getMessage()]
    assert len(said) == 1 and "could not be loaded" in said[0]


def test_a_submission_not_embedded_in_time_is_matched_by_terms_and_its_vector_kept(
        tmp_path: Path, filed_hiring: tuple[dict[str, Any], dict[str, Any]]) -> None:
    issue, match = filed_hiring
    report = next(row["feedback"] for row in _reworded(HIRING) if not _by_terms(match, row["feedback"]))
    with running_collector(tmp_path, known_issue_wait=0.001) as server:
        _put(server, issue, match)
        assert "known_issue" not in _post(server, report, "w0")  # no vector within a millisecond
        # Its vector is kept when it comes: the same words again are then recognised at once.
        for n in range(1, 80):
            time.sleep(0.25)
            if _post(server, report, f"w{n}").get("known_issue") == issue:
                break
        else:
            pytest.fail("the vector computed after the first submission stopped waiting was not kept")


def test_a_hostile_text_is_bounded_before_it_is_embedded() -> None:
    assert len(bounded("x" * 100_000)) == MAX_TEXT
    assert bounded("a\ud800b") == "a?b"


def test_the_collector_embeds_what_the_pipeline_embeds(tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A centroid made of the pipeline's own vector of one report, with a threshold only that
    vector reaches, is reached by the same report sent again: the collector's text and vector
    of it are the pipeline's. The goal is no part of that text; the message is."""
    monkeypatch.setenv("FI_MEANING_PIPELINE_KEY", PIPELINE_KEY)
    report = {**_reworded(HIRING)[3]["feedback"], "expected": "One call", "suggestion": "Add a vacancy filter"}
    with running_collector(tmp_path) as server:
        _post(server, report, "p1")
        config = Config(warehouse=WarehouseConfig(path=tmp_path / "feedback.duckdb"), privacy=PrivacyConfig(hmac_key="k" * 32),
                        sources=[HttpCollectorConfig(kind="http", name="c", url=server.url, key_env="FI_MEANING_PIPELINE_KEY")])
        with Warehouse(config.warehouse.path) as wh:
            assert ingest(config, wh).errors == []
            (text,) = wh.con.execute(f"SELECT {text_sql('reports')} FROM records r").fetchall()[0]
        vector = embedder.encode([text])[0]
        meaning = {"model": embedder.model_id, "service": "acme-companies-api", "threshold": 0.9999,
                   "centroid": [float(x) for x in vector]}
        issue = {"id": "iss_exact", "title": "Exactly that report", "status": "acknowledged"}
        _put(server, issue, {"meaning": meaning})
        assert _post(server, {**report, "goal": "Something else entirely"}, "p2")["known_issue"] == issue
        assert "known_issue" not in _post(server, {**report, "message": report["message"] + " Again."}, "p3")
