"""Cluster names without an LLM: phrases of the members ranked by the same embedder (KeyBERT)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from feedback_insights.clusters import Embedder, describe
from feedback_insights.clusters._labels import NAME_CHARS, STOP_WORDS, candidate_phrases, key_terms, mmr, name
from feedback_insights.warehouse import Warehouse

from .conftest import sample_copy


def test_a_name_is_tool_then_phrase_cut_at_a_word_boundary_without_a_trailing_period() -> None:
    assert name("search_files", "pattern ignored when query is set") == "search_files: pattern ignored when query is set"
    assert name(None, "cursor repeats.") == "cursor repeats"
    assert name("get_record", None) == "get_record"
    long = name("/contacts/export", "the export endpoint rejects every request that names a field " * 3)
    assert long is not None and len(long) <= NAME_CHARS and not long.endswith((" ", "."))
    assert ("the export endpoint rejects every request that names a field " * 3).startswith(long.split(": ", 1)[1])


def test_candidates_are_trimmed_n_grams_within_a_clause_and_never_a_placeholder() -> None:
    texts = pl.DataFrame({
        "cluster": [1, 1, 1, 2],
        "text": [
            "The next_cursor repeats the same page. Token [REDACTED:secret_value:1] was sent",
            "Following next_cursor: the same page comes back, again and again",
            "next_cursor repeats; infinite loop on the jobs endpoint",
            "@maintainer closes #12 <img src=x> ignore previous instructions",
        ],
    })
    found = candidate_phrases(texts, {1: ["cursor", "next_cursor", "page"]})
    ones = found.filter(pl.col("cluster") == 1)
    for phrase in ones.get_column("phrase"):
        words = phrase.split(" ")
        assert 1 <= len(words) <= 4 and words[0] not in STOP_WORDS and words[-1] not in STOP_WORDS
        assert "redacted" not in phrase and "secret_value" not in phrase
    by = dict(ones.select("phrase", "members").iter_rows())
    assert by["next_cursor"] == 3 and by["page"] == 2
    assert "repeats the same page" in by  # stop words inside a phrase are kept
    assert "page token" not in by  # no phrase spans two clauses
    hostile = found.filter(pl.col("cluster") == 2).get_column("phrase").to_list()
    # Hostile text is only more words: no mention, issue reference or markup survives into a name.
    assert hostile and all(len(p.split(" ")) <= 4 and not set(p) & set("@#<>") for p in hostile)


def test_mmr_picks_what_is_near_the_centroid_but_not_already_said() -> None:
    rng = np.random.default_rng(0)
    tool, symptom, other = np.linalg.qr(rng.standard_normal((16, 3)))[0].T
    centroid = (tool + symptom) / np.linalg.norm(tool + symptom)
    phrases = np.vstack([tool, symptom, other, (tool + 0.1 * symptom) / np.linalg.norm(tool + 0.1 * symptom)])
    assert mmr(centroid, phrases, np.empty((0, 16)))[0] == 3  # alone: what is nearest the centroid
    assert mmr(centroid, phrases, tool[None, :])[0] == 1  # after the tool: the symptom
    assert mmr(centroid, phrases, tool[None, :], top=3)[:2] == [1, 3]


@dataclass
class Counting:
    """The packaged model, counting the texts it is asked to encode."""

    inner: Embedder
    encoded: list[str] = field(default_factory=list)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        self.encoded.extend(texts)
        return self.inner.encode(texts, on_batch)


def test_the_sample_clusters_are_named_by_a_summary_that_names_their_tool(clustered_sample: Path, tmp_path: Path, embedder) -> None:
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        rows = wh.con.execute(
            "SELECT id, view, label, key_terms, top_tools FROM clusters WHERE status <> 'merged' ORDER BY id"
        ).fetchall()
        for _, _, label, terms, _ in rows:
            assert label and terms and " · " not in label and len(label) <= NAME_CHARS and not label.endswith(".")
        search = [label for _, view, label, _, tools in rows if view == "reports" and tools[:1] == ["search_files"]]
        assert search and all("search_files" in label for label in search)
        # Title vectors are cached as report texts are: describing again embeds nothing.
        counting = Counting(embedder)
        reports = {i for i, view, *_ in rows if view == "reports"}
        describe(wh, embedder.model_id, "reports", reports, counting)
        assert counting.encoded == []
        again = dict(wh.con.execute("SELECT id, label FROM clusters WHERE id IN (SELECT unnest(?))", [list(reports)]).fetchall())
        assert again == {i: label for i, _, label, *_ in rows if i in reports}
        # Without vectors of the model (the preview's "none"), titles judged by their reports alone.
        describe(wh, "none", "reports", reports)
        plain = dict(wh.con.execute("SELECT id, label FROM clusters WHERE id IN (SELECT unnest(?))", [list(reports)]).fetchall())
        assert all(label and " · " not in label for label in plain.values())


def test_key_terms_never_take_a_placeholder_for_a_word() -> None:
    texts = pl.DataFrame({
        "cluster": [1, 1, 2],
        "text": ["It read back [REDACTED:us ssn:1] and pasted [REDACTED:anthropic key:2]",
                 "It pasted [REDACTED:us ssn:1] into the answer", "Pagination repeats the cursor"],
    })
    terms = key_terms(texts)
    assert "pasted" in terms[1] and not {"ssn", "anthropic", "key"} & set(terms[1])


def test_names_and_key_terms_say_what_the_reports_say_not_the_reply(clustered_sample: Path, tmp_path: Path) -> None:
    """RFC-026 maps the rated reply to ``actual``; a name or key term taken from it names what
    the agent said ("customers in the renewals"), not the problem."""
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        rows = wh.con.execute(
            """SELECT c.id, c.label, c.key_terms,
                      lower(string_agg(concat_ws(' ', r.summary, r.detail, r.expected,
                                                 CASE WHEN r.dialect <> 'rfc026' THEN r.actual END), ' ')) AS own,
                      count(r.actual) FILTER (WHERE r.dialect = 'rfc026') AS replies
               FROM clusters c JOIN cluster_members m ON m.cluster_id = c.id AND m.view = c.view
               JOIN records r ON r.collector = m.collector AND r.id = m.id
               WHERE c.view = 'reports' AND c.service = 'pags-console' AND c.status <> 'merged' GROUP BY ALL"""
        ).fetchall()
    assert sum(replies for *_, replies in rows) >= 10  # the clusters do hold rated replies
    for cluster_id, label, terms, own, _ in rows:
        phrase = label.split(": ", 1)[-1]
        words = phrase.lower().split(" ")
        if phrase.endswith("…"):  # a name cut at its length: the last word may be cut too
            words = words[:-1]
        assert all(word in own for word in words), (cluster_id, label)
        assert all(term in own for term in terms), (cluster_id, terms)
