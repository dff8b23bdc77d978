"""Which fields of a record to embed: measured on the sample's planted problems.

The sample (``data/sample``, synthetic, with ``truth.jsonl``) plants 18 recurring problems and
praise themes among one-off reports. For each candidate composition this embeds the records'
text, clusters each (service, polarity) partition with the pipeline's algorithm and default
settings, and reports BCubed precision/recall/F1 over the reports that carry an id in the truth
file (one-offs are their own gold cluster), plus how many planted keys come out as one cluster
holding at least 80 % of their reports and nothing else.

Run by hand: ``python benchmarks/embed_text.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics import bcubed

from feedback_insights.clusters import TEXT_COMPOSITION, MiniLMEmbedder, embed_with_cache, place, text_sql, unit
from feedback_insights.config import ClusteringConfig, embedded_default
from feedback_insights.ingest import ingest
from feedback_insights.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[1]
TRUTH = [json.loads(line) for line in (REPO / "data" / "sample" / "truth.jsonl").read_text().splitlines()]
PLANTED_OF = {t["record_id"]: t["problem"] for t in TRUTH if not t["invalid"] and t["record_id"]}

CANDIDATES = {
    "summary": ("summary",),
    "summary, detail": ("summary", "detail"),
    "tool + free text": ("tool", "summary", "detail", "expected", "actual"),
    "tool + free text + goal": ("tool", "summary", "goal", "detail", "expected", "actual"),
    "tool + free text + suggestion": ("tool", "summary", "detail", "expected", "actual", "suggestion"),
    "category + tool + free text": ("category", "tool", "summary", "detail", "expected", "actual"),
    "lane + category + tool + free text": ("lane", "category", "tool", "summary", "detail", "expected", "actual"),
    "category + tool + free text + suggestion (chosen)": TEXT_COMPOSITION,
}


def evaluate(wh: Warehouse, embedder: MiniLMEmbedder, fields: tuple[str, ...]) -> dict[str, float]:
    rows = wh.con.execute(
        f"""SELECT id, service, lane = 'positive_feedback', {text_sql('reports', fields=fields)} AS text
            FROM records r WHERE text IS NOT NULL"""
    ).fetchall()
    vectors = embed_with_cache(wh.con, embedder, [r[3] for r in rows])
    centre = unit(vectors).mean(axis=0)
    labels = np.full(len(rows), -1)
    partitions = [(r[1], r[2]) for r in rows]
    for partition in set(partitions):
        idx = np.array([i for i, p in enumerate(partitions) if p == partition])
        placed = place(vectors[idx], np.empty((0, vectors.shape[1]), np.float32), np.empty(0, np.int64),
                       ClusteringConfig(), centre).new
        labels[idx] = np.where(placed >= 0, placed + labels.max() + 1, -1)
    scored = [i for i, r in enumerate(rows) if r[0] in PLANTED_OF]
    gold = [PLANTED_OF[rows[i][0]] or f"one-off-{i}" for i in scored]
    precision, recall, f1 = bcubed([labels[i] for i in scored], gold)
    return {"P": precision, "R": recall, "F1": f1, "planted": _recovered(labels, rows, scored)}


def _recovered(labels: np.ndarray, rows: list, scored: list[int]) -> int:
    recovered = 0
    for key in {PLANTED_OF[rows[i][0]] for i in scored} - {None}:
        mine = [i for i in scored if PLANTED_OF[rows[i][0]] == key]
        votes = Counter(labels[i] for i in mine if labels[i] >= 0)
        if not votes:
            continue
        cluster, hits = votes.most_common(1)[0]
        foreign = [i for i in scored if labels[i] == cluster and PLANTED_OF[rows[i][0]] != key]
        recovered += hits >= 0.8 * len(mine) and not foreign
    return recovered


def main() -> None:
    console = Console()
    embedder = MiniLMEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        config = embedded_default(Path(tmp) / "sample.duckdb")
        with Warehouse(config.warehouse.path) as wh:
            ingest(config, wh)
            table = Table("composition", "BCubed P", "R", "F1", "planted keys recovered (of 18)",
                          title="Embedded text, sample data, default clustering settings")
            for name, fields in CANDIDATES.items():
                result = evaluate(wh, embedder, fields)
                table.add_row(name, f"{result['P']:.3f}", f"{result['R']:.3f}", f"{result['F1']:.3f}",
                              str(result["planted"]))
    console.print(table)


if __name__ == "__main__":
    main()
