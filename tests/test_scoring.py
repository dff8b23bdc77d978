"""The signals stage: every stored record gets computed signals beside any provided ones."""

from __future__ import annotations

from pathlib import Path

from feedback_insights.config import Config, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.signals import SOURCE, score_new_records
from feedback_insights.warehouse import Warehouse

from .conftest import write_jsonl
from .test_dialects import RFC026


def test_signals_are_computed_once_beside_the_provided_nlp_object(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    failing = {"type": "bug", "goal": "Export contacts", "message": "POST /contacts/export returned 500 and "
               "silently truncated the file; expected 1200 rows but got 40", "session_id": "s1"}
    praise = {"type": "other", "goal": "Search", "message": "Cursor pagination works great, fast and clear.",
              "outcome": "completed"}
    write_jsonl(drop / "a.jsonl", [failing, praise, RFC026])
    config = Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PrivacyConfig(hmac_key="k" * 32),
        sources=[FileDropConfig(kind="files", name="drop", path=drop, service="acme-companies-api")],
    )
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        assert score_new_records(wh, batch_size=2) == 3
        assert score_new_records(wh) == 0
        rows = wh.con.execute(
            """SELECT r.summary, s.sentiment, s.specificity, s.expectation_gap, s.severity_language, s.source,
                      r.metadata->>'$.nlp.sentiment'
               FROM records r JOIN record_signals s USING (collector, id) ORDER BY s.sentiment"""
        ).fetchall()
    by_summary = {row[0]: row[1:] for row in rows}
    fail = by_summary[failing["message"]]
    good = by_summary[praise["message"]]
    assert fail[0] < -0.2 < 0.2 < good[0]
    assert fail[1] > good[1]  # a status code, a path and counts are specific
    assert fail[2] is True and good[2] is False
    assert {row[5] for row in rows} == {SOURCE}
    # The RFC-026 message's own nlp object is kept as provided, next to ours.
    rfc = by_summary[RFC026["comment"]]
    assert float(rfc[-1]) == RFC026["nlp"]["sentiment"]
