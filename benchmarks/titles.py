"""Title benchmark: do the names the pipeline gives clusters (and so the titles of their drafted
issues) say what the problem is, without an LLM?

1. **The sample's 15 planted problems**, as a maintainer would judge a title: it must name the
   *thing* (endpoint, tool or feature) and the *symptom*. ``planted.GOLD`` holds, per problem,
   the terms a title must contain: one of each group, as a case-insensitive substring (written from
   ``data/sample/generate.py``'s report templates before looking at any title we produce). A
   problem's title is that of the cluster holding most of its reports; an unclustered problem
   has none and fails. Target: at least 13 of 15.
2. **bug_duplicates** (``../shared/data``): each of its 92 duplicate groups, given only the
   reports' *bodies* (their human-written titles held back), is named, and the name is scored
   against the group's own titles: content-word F1 with the closest of them, mean over groups.

Beside ours, two baselines on the same input: the first report's first line, cut to 80
characters (what a person skimming would copy), and the names clusters had before this method
(n-gram phrases ranked against the centroid, :func:`~feedback_insights.clusters._labels.phrase_names`).
Settings were chosen on these two sets themselves (there is no held-out title set here): the
table says how well the method does on them, not on unseen data.

Run from the repository root (about 1-2 minutes: one pipeline run on the sample, then embedding
the bug bodies)::

    .venv/bin/python benchmarks/titles.py [--warehouse feedback.duckdb]

Exit status 0 when the target passes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from feedback_insights.clusters import embed_with_cache, packaged
from feedback_insights.clusters._embedding import to_matrix
from feedback_insights.clusters._labels import STOP_WORDS, candidate_phrases, key_terms, phrase_names
from feedback_insights.clusters._titles import NAME_CHARS, choose_titles, fit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planted import GOLD, PROBLEMS, named, truth_by_record  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUGS = REPO.parent / "shared" / "data" / "bug_duplicates.jsonl"
TARGET = 13

_REPORTS = """
SELECT m.cluster_id AS cluster, m.id, r.account, r.summary, r.tool, r.received_at,
       concat_ws(chr(10), r.summary, r.detail, r.expected, r.actual) AS text, e.vector
FROM cluster_members m JOIN records r USING (collector, id)
JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
WHERE m.view = 'reports' AND m.cluster_id IS NOT NULL
ORDER BY m.cluster_id, r.received_at, m.id
"""


def sample_warehouse(console: Console) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="titles-"))
    console.print("running the pipeline on the sample …")
    subprocess.run([sys.executable, "-m", "feedback_insights", "run"], cwd=folder, check=True,
                   capture_output=True)
    return folder / "feedback.duckdb"


def sample_titles(path: Path) -> dict[str, dict[str, str | None]]:
    """Per planted problem: its majority cluster's title by each method."""
    copy = Path(tempfile.mkdtemp(prefix="titles-")) / "copy.duckdb"
    shutil.copyfile(path, copy)  # the phrase baseline caches its phrase vectors there
    con = duckdb.connect(str(copy))
    model = con.sql("SELECT any_value(model) FROM embeddings").fetchall()[0][0]
    truth = truth_by_record(con)
    table = con.sql(_REPORTS, params={"model": model}).to_arrow_table()
    members = pl.from_arrow(table.drop(["vector"]))
    assert isinstance(members, pl.DataFrame)
    drafted = dict(con.execute("SELECT cluster_id, title FROM drafts WHERE status <> 'superseded'").fetchall())
    labels = dict(con.execute("SELECT id, label FROM clusters").fetchall())
    services = dict(con.execute("SELECT id, service FROM clusters").fetchall())
    old = _phrase_baseline(members, to_matrix(table.column("vector")), con, model)
    first = {c: fit(_first_line(g.item(0, "summary")), NAME_CHARS)
             for (c,), g in members.group_by("cluster", maintain_order=True)}
    majority: dict[str, Counter[int]] = defaultdict(Counter)
    for record_id, cluster in members.select("id", "cluster").iter_rows():
        if (problem := truth[record_id]["problem"]) in GOLD:
            majority[problem][cluster] += 1
    out = {}
    for problem in PROBLEMS:
        cluster = majority[problem].most_common(1)[0][0] if majority[problem] else None
        out[problem] = {
            "ours": None if cluster is None else drafted.get(cluster) or labels.get(cluster),
            "first line": None if cluster is None else first[cluster],
            "phrase names": None if cluster is None else _with_service(old.get(cluster), services[cluster]),
        }
    return out


def _with_service(name: str | None, service: str | None) -> str | None:
    """A phrase name as a drafted title read it: after the service when it names no tool."""
    return name if not name or ": " in name else f"{service}: {name}"


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _phrase_baseline(members: pl.DataFrame, vectors: np.ndarray, con: duckdb.DuckDBPyConnection,
                     model: str) -> dict[int, str]:
    """The names clusters had before: phrases of the reports' free text ranked against the
    centroid, after the tool at least half the members name."""
    texts = members.select("cluster", "text")
    phrases = candidate_phrases(texts, key_terms(texts))
    embedder = packaged(model)
    assert embedder is not None
    tools = (members.group_by("cluster", "tool").len().filter(pl.col("tool").is_not_null())
             .join(members.group_by("cluster").len("members"), on="cluster")
             .filter(2 * pl.col("len") >= pl.col("members")).sort("len", descending=True).unique("cluster", keep="first"))
    main = dict(tools.select("cluster", "tool").iter_rows())
    return phrase_names(phrases, _centroids(members, vectors), main, lambda t: embed_with_cache(con, embedder, t))


def _centroids(members: pl.DataFrame, vectors: np.ndarray) -> dict[int, np.ndarray]:
    clusters = members.get_column("cluster").to_numpy()
    out = {}
    for cluster in np.unique(clusters):
        total = vectors[clusters == cluster].sum(axis=0)
        out[int(cluster)] = total / max(float(np.linalg.norm(total)), 1e-12)
    return out


_CONTENT = re.compile(r"[a-z0-9][a-z0-9_'.-]*[a-z0-9]|[a-z0-9]")


def content_words(text: str | None) -> set[str]:
    return {w for w in _CONTENT.findall((text or "").lower()) if w not in STOP_WORDS}


def overlap(title: str | None, references: list[str]) -> tuple[float, float, float]:
    """Content-word precision, recall and F1 of ``title`` against the closest (by F1) of
    ``references``."""
    mine = content_words(title)
    best = (0.0, 0.0, 0.0)
    for reference in references:
        theirs = content_words(reference)
        common = len(mine & theirs)
        if common and 2 * common / (len(mine) + len(theirs)) > best[2]:
            best = (common / len(mine), common / len(theirs), 2 * common / (len(mine) + len(theirs)))
    return best


def bug_titles(console: Console) -> dict[str, tuple[float, float, float]]:
    """Mean title overlap (precision, recall, F1) over bug_duplicates' duplicate groups, by method."""
    rows = [json.loads(line) for line in BUGS.read_text().splitlines()]
    groups = Counter(r["label"] for r in rows)
    rows = [r for r in rows if groups[r["label"]] >= 2]
    labels = sorted({r["label"] for r in rows})
    number = {label: i for i, label in enumerate(labels)}
    members = pl.DataFrame({"cluster": [number[r["label"]] for r in rows], "account": [r["id"] for r in rows],
                            "summary": [r["body"] for r in rows]})
    embedder = packaged(_model())
    assert embedder is not None
    con = duckdb.connect()
    con.execute("CREATE TABLE embeddings (model VARCHAR, text_sha256 VARCHAR, vector FLOAT[], PRIMARY KEY (model, text_sha256))")
    console.print(f"embedding {len(rows)} bug bodies …")
    vectors = embed_with_cache(con, embedder, [r["body"] or r["title"] for r in rows])
    def embedded(texts: list[str]) -> np.ndarray:
        return embed_with_cache(con, embedder, texts)
    ours = choose_titles(members, vectors, {}, embedded)
    texts = members.select("cluster", pl.col("summary").alias("text"))
    phrases = phrase_names(candidate_phrases(texts, key_terms(texts)), _centroids(members, vectors), {}, embedded)
    references = defaultdict(list)
    first: dict[int, str] = {}
    for r in rows:
        references[number[r["label"]]].append(r["title"])
        first.setdefault(number[r["label"]], fit(_first_line(r["body"]), NAME_CHARS))
    methods = {"ours": ours, "first line": first, "phrase names": phrases}
    return {name: tuple(np.mean([overlap(names.get(c), references[c]) for c in references], axis=0).tolist())
            for name, names in methods.items()}


def _model() -> str:
    from feedback_insights.clusters import embedder_for
    from feedback_insights.config import EmbeddingConfig

    return embedder_for(EmbeddingConfig()).model_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warehouse", type=Path, help="a warehouse the sample already ran into")
    args = parser.parse_args()
    console = Console(width=max(Console().width, 160))
    path = args.warehouse or sample_warehouse(console)
    titles = sample_titles(path)
    methods = ("ours", "first line", "phrase names")
    detail = Table("planted problem", *methods, title="Sample: does the title name the thing and the symptom?")
    for problem, by in titles.items():
        detail.add_row(problem, *(f"{'✓' if named(problem, by[m]) else '✗'} {by[m] or '(unclustered)'}"
                                  for m in methods))
    console.print(detail)
    counts = {m: sum(named(p, by[m]) for p, by in titles.items()) for m in methods}
    bugs = bug_titles(console)
    summary = Table("method", "sample: named by thing and symptom (of 15)", "bug_duplicates: word precision",
                    "recall", "F1", title="Titles without an LLM (settings chosen on these same two sets)")
    for m in methods:
        summary.add_row(m, str(counts[m]), *(f"{v:.3f}" for v in bugs[m]))
    console.print(summary)
    ok = counts["ours"] >= TARGET
    console.print(f"{'PASS' if ok else 'FAIL'}: {counts['ours']} of 15 planted problems named (target ≥ {TARGET})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
