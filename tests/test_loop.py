"""The whole loop on 127.0.0.1, with the AFP's own SDK (backloop-sdk) as the agents and the
service: submitted → pulled → clustered → drafted → approved → filed on the GitHub fake →
known_issue PUT to the collector → the next matching agent is told in its 202 ack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backloop import FeedbackClient, FeedbackHandler, forward_to

from feedback_insights.clusters import cluster_new_records
from feedback_insights.config import (
    Config,
    GitHubConfig,
    HttpCollectorConfig,
    PrivacyConfig,
    WarehouseConfig,
)
from feedback_insights.drafts import approve, draft_clusters, edit_form, save_edit
from feedback_insights.ingest import CollectorClient, ingest
from feedback_insights.publish import IssueTracker, publish
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .collector_server import AGENT_KEY, INGEST_KEY, PIPELINE_KEY, running_collector
from .github_fake import running_github

HIRING = [
    "No hiring role filter on /companies/search, so I cannot find companies hiring GTM engineers",
    "There is no way to filter /companies/search by hiring role; I wanted companies hiring sales engineers",
    "Filtering companies by open hiring role is impossible with /companies/search, no such filter parameter",
    "The /companies/search endpoint lacks a hiring role filter; searching companies that are hiring failed",
]
EXPORT = [
    "The /contacts/export call returns a bare 400 without naming which export field is invalid",
    "Export of contacts fails with HTTP 400 and no field path in the error body of /contacts/export",
    "/contacts/export rejects my request with 400 and never says which parameter of the export is wrong",
]


def _submission(message: str, endpoint: str, session: str) -> dict:
    return {"type": "missing_capability" if "filter" in message else "unhelpful_error", "goal": "Help my user with their task",
            "endpoint": endpoint, "method": "GET", "message": message, "outcome": "blocked", "session_id": session}


@pytest.fixture
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FI_LOOP_PIPELINE_KEY", PIPELINE_KEY)
    with running_collector(tmp_path) as collector, running_github() as github:
        github.add_repo("acme/companies-api")
        config = Config(
            warehouse=WarehouseConfig(path=tmp_path / "feedback.duckdb"),
            privacy=PrivacyConfig(hmac_key="loop-test-key-xxxxxxxxxxxxxxxxxx"),
            github=GitHubConfig(base_url=github.url, token_env="FI_LOOP_GITHUB_TOKEN", default_repo="acme/companies-api",
                                timeout=2, retries=2, backoff=0, seconds_between_writes=0),
            sources=[HttpCollectorConfig(kind="http", name="acme-collector", url=collector.url, key_env="FI_LOOP_PIPELINE_KEY")],
        )
        monkeypatch.setenv("FI_LOOP_GITHUB_TOKEN", github.token)
        yield collector, github, config


def _pipeline(config: Config, embedder, collectors: dict[str, CollectorClient], workaround: str | None = None) -> None:
    with Warehouse(config.warehouse.path) as wh:
        assert ingest(config, wh).errors == []
        score_new_records(wh)
        cluster_new_records(wh, embedder)
        draft_clusters(config, wh)
        for draft in wh.con.sql("SELECT * FROM drafts WHERE status = 'pending'").pl().to_dicts():
            if workaround and "hiring" in draft["title"]:
                save_edit(wh, draft["id"], "maria", edit_form(draft).replace("workaround: \n", f"workaround: {workaround}\n"))
            approve(wh, draft["id"], "maria")
        tracker = IssueTracker(config.github, config.github.token())
        run = publish(config, wh, tracker, collectors)
        tracker.close()
    assert run.errors == []


def test_agents_hitting_a_filed_problem_are_told_it_is_known(loop, embedder) -> None:
    collector, github, config = loop
    # The service forwards its agents' reports (one account each) with the SDK's forward_to…
    handler = FeedbackHandler(forward_to(collector.url, ingest_key=INGEST_KEY), service="acme-companies-api", rate_limit=None)
    for i, message in enumerate(HIRING):
        status, _, _ = handler.handle_submit(json.dumps(_submission(message, "/companies/search", f"h{i}")), "application/json", account=f"acct_h{i}")
        assert status == 202
    for i, message in enumerate(EXPORT):
        status, _, _ = handler.handle_submit(json.dumps(_submission(message, "/contacts/export", f"e{i}")), "application/json", account=f"acct_e{i}")
        assert status == 202
    # …and one agent submits directly with the SDK's client.
    agent = FeedbackClient.from_discovery(collector.url, api_key=AGENT_KEY, session_id="direct-1")
    assert "known_issue" not in agent.submit(_submission(HIRING[0], "/companies/search", "direct-1"))

    with CollectorClient(collector.url, PIPELINE_KEY) as client:
        _pipeline(config, embedder, {"acme-collector": client}, workaround="Search /jobs?role=... and join on company_id")

    issues = github.issues("acme/companies-api")
    assert len(issues) == 2  # one issue per problem
    hiring = next(i for i in issues if "hiring" in i["body"].lower())
    assert "Agents from **5 accounts**" in hiring["body"]  # four forwarded accounts + the direct agent

    # A new agent hits the same wall: the collector's 202 says it is known, with the workaround.
    later = FeedbackClient.from_discovery(collector.url, api_key=AGENT_KEY, session_id="direct-2")
    ack = later.submit(_submission("Again no hiring role filter on /companies/search for hiring companies", "/companies/search", "direct-2"))
    known = ack["known_issue"]
    assert known["url"] == hiring["html_url"] and known["status"] == "acknowledged"
    assert known["workaround"] == "Search /jobs?role=... and join on company_id"
    status, body, _ = handler.handle_submit(
        json.dumps(_submission("Export of contacts fails with HTTP 400 again and names no field", "/contacts/export", "e9")),
        "application/json", account="acct_e9",
    )
    assert status == 202 and body["known_issue"]["id"] != known["id"] and "workaround" not in body["known_issue"]

    # The maintainer fixes it: the next run tells the collectors, and agents hear "fixed".
    github.close_issue("acme/companies-api", hiring["number"], "completed")
    with CollectorClient(collector.url, PIPELINE_KEY) as client:
        _pipeline(config, embedder, {"acme-collector": client})
    assert later.submit(_submission(HIRING[1], "/companies/search", "direct-3"))["known_issue"]["status"] == "fixed"
    assert len(github.issues("acme/companies-api")) == 2
