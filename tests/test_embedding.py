"""The packaged model, offline, and the warehouse cache that makes a second run embed only new text."""

from __future__ import annotations

import json

import duckdb
import numpy as np

from feedback_insights.clusters import MiniLMEmbedder, embed_with_cache, record_text, text_sha256
from feedback_insights.warehouse import Warehouse


class CountingEmbedder(MiniLMEmbedder):
    """The real model, remembering which texts it was asked to encode."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[str] = []

    def encode(self, texts, on_batch=None):
        self.encoded.extend(texts)
        return super().encode(texts, on_batch)


def test_vectors_are_unit_length_and_duplicates_are_closer_than_strangers(embedder) -> None:
    vectors = embedder.encode([
        "search_files ignores the glob parameter and returns every file",
        "The glob argument of search_files has no effect; all files come back",
        "Webhook signatures never verify with the documented sha1 scheme",
    ])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    same, other = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert same > 0.6 > other


def test_the_text_composition_skips_empty_fields() -> None:
    record = {"tool": "search_files", "summary": "glob ignored", "detail": "  ", "expected": None,
              "actual": "every file", "goal": "find the config", "category": "confusing_schema"}
    assert record_text(record) == "confusing schema\nsearch files\nglob ignored\nevery file"
    assert record_text({"summary": None, "goal": "only a goal"}) == ""


def test_a_second_run_embeds_only_new_text(tmp_path) -> None:
    counting = CountingEmbedder()
    texts = ["deploy_service reports success but nothing deploys", "pagination cursor repeats page 3"]
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        first = embed_with_cache(wh.con, counting, texts + [texts[0]])  # a repeat in one call: encoded once
        assert counting.encoded == texts
        second = embed_with_cache(wh.con, counting, [texts[1], "a new report about rate limits", texts[0]])
        assert counting.encoded == texts + ["a new report about rate limits"]
        stored = wh.con.execute("SELECT model, text_sha256 FROM embeddings ORDER BY ALL").fetchall()
    assert np.array_equal(first[0], first[2]) and np.allclose(second[0], first[1]) and np.allclose(second[2], first[0])
    assert stored == sorted((MiniLMEmbedder.model_id, text_sha256(t)) for t in [*texts, "a new report about rate limits"])


def test_the_model_loads_without_the_network(tmp_path) -> None:
    import subprocess
    import sys

    # A child process with no proxy and an unroutable hub endpoint: loading must not need it.
    code = ("from feedback_insights.clusters import MiniLMEmbedder; "
            "print(MiniLMEmbedder().encode(['hello']).shape)")
    env = {"PATH": "/usr/bin:/bin", "HF_ENDPOINT": "http://127.0.0.1:9", "HOME": str(tmp_path),
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(1, 384)"


def test_the_sql_and_python_compositions_agree_on_every_sample_record(tmp_path) -> None:
    from feedback_insights.clusters import text_sql
    from feedback_insights.config import embedded_default
    from feedback_insights.core import FIELDS
    from feedback_insights.ingest import ingest

    config = embedded_default(tmp_path / "wh.duckdb")
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        columns = [f for f in FIELDS if f not in ("agent", "metadata", "original")]
        rows = wh.con.execute(f"SELECT {text_sql('reports')}, {', '.join(columns)} FROM records r").fetchall()
    vague = with_turn = 0
    for sql_text, *values in rows:
        python_text = record_text(dict(zip(columns, values, strict=True)))
        assert (sql_text or "") == python_text
        vague += not python_text
        with_turn += "\nthe reply it is about: " in python_text
    assert 0 < vague < len(rows) / 5  # some reports are too vague to cluster; most are not
    assert with_turn >= 60  # the in-session complaints carry the reply they are about


def test_the_turn_a_report_is_about_follows_its_own_words() -> None:
    """Turn-anchored feedback adds the reply, the turn before and a voice turn's dictation,
    labelled, after the report's own lines; JSON text (a warehouse row) or objects (a file)."""
    turn = {"target_text": " You have 3 agents. ", "prompt_text": "how many agents?", "target_role": "assistant"}
    record = {"category": "incorrect_response", "summary": "It only listed some of my agents",
              "evidence": json.dumps(turn), "context": {"dictation": "how many ages", "surface": "chat"}}
    assert record_text(record) == (
        "incorrect response\nIt only listed some of my agents\nthe reply it is about: You have 3 agents.\n"
        "the turn before: how many agents?\nvoice input heard as: how many ages"
    )
    # RFC-026 keeps the rated exchange under evidence.context: the same lines.
    rated = {"category": "incorrect_response", "summary": "It only listed some of my agents", "actual": "You have 3.",
             "evidence": {"context": {"user_query": "how many agents?", "ai_response_snippet": "You have 3."}}}
    assert record_text(rated) == ("incorrect response\nIt only listed some of my agents\nYou have 3.\n"
                                  "the reply it is about: You have 3.\nthe turn before: how many agents?")
    # Not a string, not JSON, or blank: no line, and never an error.
    assert record_text({**record, "evidence": "{cut by a redaction", "context": {"dictation": 7}}) == (
        "incorrect response\nIt only listed some of my agents"
    )
    # The reply does not make a vague report specific: still too few words of its own.
    assert record_text({**record, "summary": "it's wrong"}) == ""


def test_sql_and_python_agree_on_awkward_turns(tmp_path) -> None:
    from feedback_insights.clusters import text_sql

    cases = ['{"target_text": "  spaced\\n", "prompt_text": 5}', '{cut', "[1, 2]", '"just text"', None,
             '{"context": {"user_query": "  asked\\t", "ai_response_snippet": {"nested": 1}}}', '{"context": "flat"}',
             '{"target_text": "", "prompt_text": "it\'s \\"quoted\\" -- and ; dropped"}']
    with duckdb.connect() as con:
        for evidence in cases:
            sql = con.execute(
                f"SELECT {text_sql('reports')} FROM (SELECT 'other' AS category, NULL AS tool, "
                "'the export keeps failing badly' AS summary, NULL AS detail, NULL AS expected, NULL AS actual, "
                "NULL AS suggestion, ?::VARCHAR AS evidence, NULL::VARCHAR AS context) r",
                [evidence],
            ).fetchone()[0]
            python = record_text({"category": "other", "summary": "the export keeps failing badly", "evidence": evidence})
            assert sql == python, evidence
