"""Which parts of a record to embed: measured on the sample's planted problems.

The sample (``data/sample``, synthetic, with ``truth.jsonl``) plants 15 recurring problems and 3
praise themes among one-off reports. For each candidate composition this embeds the records'
text, clusters each (service, polarity) partition with the pipeline's algorithm and default
settings, and reports:

- BCubed precision/recall/F1 over every valid unit (one-offs are their own gold cluster);
- planted keys (of 18) that come out as one cluster holding at least 80 % of their reports and
  no report of another key;
- for pags-console's problem reports (people's in-session complaints, the hard part), how often
  a report's nearest report (1-NN) and its three nearest (3-NN) share its planted problem: what
  any clustering can work with, whatever its settings;
- the cohesion of pags-console's planted problems taken whole (mean pairwise cosine of their
  reports on the view-centred vectors, as the algorithm's gate computes it), lowest and median:
  a cluster holding one whole problem survives the gate only above ``min_cohesion``;
- an upper bound for any clustering that cuts one similarity threshold: over average, complete
  and single linkage of pags-console's complaints and every threshold from 0.05 to 0.95, the
  most of its 5 planted problems that come out as exactly one cluster holding no other planted
  problem (the sample test's rule, drafts aside). It tells a representation that no setting
  can separate from one that the settings fail to.

A second table gives the turn its best case (:func:`anchored`): complaints grouped by the exact
turn lines they carry, the groups merged by their reports' own words.

Besides one embedded text per record, it measures vectors combined per record (issue 18's
idea that the complaint should dominate and the turn only break ties): the report's own lines
and the turn lines embedded separately, ``unit(v_own + Σ w·v_turn)``.

Then it runs the real pipeline on the embedded default (ingest, signals, clusters, drafts) with
the chosen composition and prints, per planted problem, how many clusters and drafts it became
and whether a draft mixes it with another planted key (``planted.py``); and the same counts
with vectors combined (:class:`Combined`).

Run by hand: ``python benchmarks/embed_text.py``.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics import bcubed
from planted import HEADERS, mixed_drafts, outcomes, truth_by_record

from feedback_insights.clusters import (
    TEXT_COMPOSITION,
    TURN_CONTEXT,
    MiniLMEmbedder,
    background,
    cluster_new_records,
    embed_with_cache,
    place,
    text_sql,
    unit,
)
from feedback_insights.config import ClusteringConfig, embedded_default
from feedback_insights.drafts import draft_clusters
from feedback_insights.ingest import ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

FREE = ("tool", "summary", "detail", "expected", "actual")
REPLY = tuple(t for t in TURN_CONTEXT if t[2].startswith("the reply"))
BEFORE = tuple(t for t in TURN_CONTEXT if t[2].startswith("the turn before"))
DICTATION = tuple(t for t in TURN_CONTEXT if t[1] == "dictation")
SESSION_ONLY = tuple(t for t in TURN_CONTEXT if not t[1].startswith("context."))  # not RFC-026's exchange
UNLABELLED = tuple((column, path, "") for column, path, _ in TURN_CONTEXT)

#: name → (fields, turn lines).
CANDIDATES: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str, str], ...]]] = {
    "summary": (("summary",), ()),
    "tool + free text": (FREE, ()),
    "tool + free text + goal": (("tool", "summary", "goal", "detail", "expected", "actual"), ()),
    "category + tool + free text": (("category", *FREE), ()),
    "category + tool + free text + suggestion (issue 17)": (TEXT_COMPOSITION, ()),
    "… + dictation": (TEXT_COMPOSITION, DICTATION),
    "… + the turn before + dictation": (TEXT_COMPOSITION, BEFORE + DICTATION),
    "… + the reply + dictation": (TEXT_COMPOSITION, REPLY + DICTATION),
    "… + reply, turn before, dictation; session rows only": (TEXT_COMPOSITION, SESSION_ONLY),
    "… + reply, turn before, dictation; unlabelled": (TEXT_COMPOSITION, UNLABELLED),
    "… + reply, turn before, dictation (chosen)": (TEXT_COMPOSITION, TURN_CONTEXT),
}

#: name → (turn lines, weight) pairs: each group of turn lines is embedded as one text and its
#: vector, times the weight, added to the vector of the report's own lines (then unit length).
COMBINED: dict[str, tuple[tuple[tuple[tuple[str, str, str], ...], float], ...]] = {
    "own ⊕ 0.25 × turn lines": ((TURN_CONTEXT, 0.25),),
    "own ⊕ 0.5 × turn lines": ((TURN_CONTEXT, 0.5),),
    "own ⊕ 0.7 × turn lines": ((TURN_CONTEXT, 0.7),),
    "own ⊕ 0.5 × reply ⊕ 0.5 × dictation": ((REPLY, 0.5), (DICTATION, 0.5)),
    "own ⊕ 1.0 × dictation": ((DICTATION, 1.0),),
}


def _rows(wh: Warehouse, fields: tuple[str, ...], turn: tuple[tuple[str, str, str], ...]) -> list[tuple]:
    return wh.con.execute(
        f"""SELECT id, service, lane = 'positive_feedback', {text_sql('reports', fields=fields, turn=turn)} AS text
            FROM records r WHERE text IS NOT NULL ORDER BY received_at, id"""
    ).fetchall()


def combined(wh: Warehouse, embedder: MiniLMEmbedder, groups: tuple[tuple[tuple[tuple[str, str, str], ...], float], ...]
             ) -> tuple[list[tuple], np.ndarray]:
    """The rows and ``unit(v_own + Σ w·v_group)``: a group's text is what its lines add to the
    report's own (the same rows: the word floor counts the report's own words only)."""
    rows = _rows(wh, TEXT_COMPOSITION, ())
    vectors = embed_with_cache(wh.con, embedder, [r[3] for r in rows])
    for turn, weight in groups:
        with_turn = [r[3] for r in _rows(wh, TEXT_COMPOSITION, turn)]
        if not all(full.startswith(r[3]) for r, full in zip(rows, with_turn, strict=True)):
            raise AssertionError("the two compositions' rows are out of step")
        lines = [full[len(own) + 1:] for (*_, own), full in zip(rows, with_turn, strict=True)]
        has = np.array([bool(line) for line in lines])
        if has.any():
            vectors[has] += weight * embed_with_cache(wh.con, embedder, [line for line in lines if line])
    return rows, unit(vectors)


def evaluate(rows: list[tuple], vectors: np.ndarray, truth: dict[str, dict]) -> dict[str, float]:
    centre = background(vectors)  # one centre for the whole view, as the stage has
    labels = np.full(len(rows), -1)
    partitions = [(r[1], r[2]) for r in rows]
    for partition in dict.fromkeys(partitions):
        idx = np.array([i for i, p in enumerate(partitions) if p == partition])
        placed = place(vectors[idx], np.empty((0, vectors.shape[1]), np.float32), np.empty(0, np.int64),
                       ClusteringConfig(), centre).new
        labels[idx] = np.where(placed >= 0, placed + labels.max() + 1, -1)
    keys = [truth[r[0]]["problem"] for r in rows]
    gold = [k or f"one-off-{i}" for i, k in enumerate(keys)]
    precision, recall, f1 = bcubed(list(labels), gold)
    complaints = [i for i, r in enumerate(rows) if r[1] == "pags-console" and not r[2]]
    nn1, nn3 = _neighbours_agree(unit(vectors[complaints]), [gold[i] for i in complaints])
    centred = unit(unit(vectors) - centre)[complaints]
    cohesions = _cohesions(centred, [keys[i] for i in complaints])
    return {"P": precision, "R": recall, "F1": f1, "planted": _recovered(labels, keys), "nn1": nn1, "nn3": nn3,
            "cohesion min": min(cohesions), "cohesion median": float(np.median(cohesions)),
            "best cut": _best_cut(centred, [keys[i] for i in complaints])}


def _best_cut(centred: np.ndarray, keys: list[str | None]) -> int:
    """The most planted problems that any one cut of a hierarchical clustering (three linkages,
    thresholds 0.05–0.95) makes exactly one cluster (two or more reports) with no other planted
    problem in it."""
    from scipy.cluster.hierarchy import fcluster, linkage

    best = 0
    for method in ("average", "complete", "single"):
        tree = linkage(centred, method, metric="cosine")
        for threshold in np.arange(0.05, 0.96, 0.05):
            best = max(best, _whole(fcluster(tree, 1 - threshold, "distance"), keys))
    return best


def _whole(labels: np.ndarray, keys: list[str | None]) -> int:
    """How many planted problems are exactly one cluster (two or more reports) holding no other
    planted problem."""
    sizes = Counter(labels)
    clusters_of: dict[str, set[int]] = {}  # planted problem → the clusters holding its reports
    for label, key in zip(labels, keys, strict=True):
        if key and sizes[label] > 1:
            clusters_of.setdefault(key, set()).add(label)
    shared = Counter(label for held in clusters_of.values() for label in held)
    return sum(len(held) == 1 and shared[next(iter(held))] == 1 for held in clusters_of.values())


def _cohesions(centred: np.ndarray, keys: list[str | None]) -> list[float]:
    """Each planted problem's mean pairwise cosine, taken whole, on view-centred vectors."""
    out = []
    for key in sorted({k for k in keys if k}):
        mine = centred[[i for i, k in enumerate(keys) if k == key]]
        n = len(mine)
        out.append(float(((mine.sum(axis=0) ** 2).sum() - n) / (n * (n - 1))))
    return out


def _recovered(labels: np.ndarray, keys: list[str | None]) -> int:
    recovered = 0
    for key in {k for k in keys if k}:
        mine = [i for i, k in enumerate(keys) if k == key]
        votes = Counter(labels[i] for i in mine if labels[i] >= 0)
        if not votes:
            continue
        cluster, hits = votes.most_common(1)[0]
        foreign = [i for i, k in enumerate(keys) if labels[i] == cluster and k and k != key]
        recovered += hits >= 0.8 * len(mine) and not foreign
    return recovered


def _neighbours_agree(vectors: np.ndarray, gold: list[str]) -> tuple[float, float]:
    """Over reports of a planted problem: the share whose nearest report shares it, and the mean
    share of its three nearest that do."""
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    order = np.argsort(-sims, axis=1)[:, :3]
    labels = np.array(gold)
    planted = [i for i, g in enumerate(gold) if not g.startswith("one-off")]
    return (float(np.mean([labels[order[i, 0]] == labels[i] for i in planted])),
            float(np.mean([np.mean(labels[order[i]] == labels[i]) for i in planted])))


def anchored(console: Console, embedder: MiniLMEmbedder, tmp: Path) -> None:
    """A bound that gives the turn its best case: pags-console's complaints grouped by the turn
    lines they carry, exactly (in the sample every such group holds one planted problem, which
    no method could know of real reports), then the groups merged by average linkage of the
    centroids of their reports' own lines, where averaging removes each phrasing's noise. Over
    every threshold from 0.05 to 0.95: the most of the 5 problems that come out whole (the rule
    of :func:`_best_cut`), and the thresholds that reach it."""
    config = embedded_default(tmp / "anchored.duckdb")
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        truth = truth_by_record(wh.con)
        with_turn = {r[0]: r[3] for r in _rows(wh, TEXT_COMPOSITION, TURN_CONTEXT)}
        own_lines = {r[0]: r[3] for r in _rows(wh, TEXT_COMPOSITION, ())}
        table = Table("own lines", "centre", "turn groups", "pags whole at the best threshold (of 5)",
                      "thresholds reaching it", title="pags-console complaints grouped by their turn, groups merged by their own words")
        for name, fields in (("summary", ("summary",)), ("category + tool + free text + suggestion", TEXT_COMPOSITION)):
            rows = [r for r in _rows(wh, fields, ()) if r[0] in own_lines and not r[2]]  # the problem view
            vectors = embed_with_cache(wh.con, embedder, [r[3] for r in rows])
            pags = np.array([r[1] == "pags-console" for r in rows])
            turns = [with_turn[r[0]][len(own_lines[r[0]]):] or f"none {r[0]}" for r in rows if r[1] == "pags-console"]
            group = np.unique(turns, return_inverse=True)[1].ravel()
            keys = [truth[r[0]]["problem"] for r in rows if r[1] == "pags-console"]
            for centre_name, centre in (("problem view", background(vectors)), ("pags-console", background(vectors[pags]))):
                centred = unit(unit(vectors[pags]) - centre)
                centroids = unit(np.stack([centred[group == g].mean(axis=0) for g in range(group.max() + 1)]))
                best, at = _merged_best(centroids, group, keys)
                table.add_row(name, centre_name, str(group.max() + 1), str(best), at)
    console.print(table)


def _merged_best(centroids: np.ndarray, group: np.ndarray, keys: list[str | None]) -> tuple[int, str]:
    from scipy.cluster.hierarchy import fcluster, linkage

    tree = linkage(centroids, "average", metric="cosine")
    counts = {round(float(t), 2): _whole(fcluster(tree, 1 - t, "distance")[group], keys) for t in np.arange(0.05, 0.96, 0.05)}
    best = max(counts.values())
    return best, ", ".join(f"{t:.2f}" for t, c in counts.items() if c == best)


def compositions(console: Console, embedder: MiniLMEmbedder, tmp: Path) -> None:
    config = embedded_default(tmp / "compositions.duckdb")
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        truth = truth_by_record(wh.con)
        table = Table("composition", "BCubed P", "R", "F1", "planted keys whole (of 18)", "pags 1-NN", "pags 3-NN",
                      "pags cohesion min / median", "pags whole at the best cut (of 5)",
                      title="Embedded text, sample data, default clustering settings")
        measured = {name: _rows(wh, fields, turn) for name, (fields, turn) in CANDIDATES.items()}
        runs = [(name, rows, embed_with_cache(wh.con, embedder, [r[3] for r in rows])) for name, rows in measured.items()]
        runs += [(name, *combined(wh, embedder, groups)) for name, groups in COMBINED.items()]
        for name, rows, vectors in runs:
            r = evaluate(rows, vectors, truth)
            table.add_row(name, f"{r['P']:.3f}", f"{r['R']:.3f}", f"{r['F1']:.3f}", str(r["planted"]),
                          f"{r['nn1']:.2f}", f"{r['nn3']:.2f}", f"{r['cohesion min']:.2f} / {r['cohesion median']:.2f}",
                          str(r["best cut"]))
    console.print(table)


class Combined:
    """An embedder for the pipeline run that combines vectors instead of embedding one text: the
    stage hands it the chosen composition, whose labelled turn lines it embeds apart from the
    report's own lines, ``unit(v_own + weight·v_turn)``. Its own model id keeps its vectors
    apart in the warehouse cache."""

    def __init__(self, embedder: MiniLMEmbedder, weight: float) -> None:
        self.embedder, self.weight = embedder, weight
        self.model_id = f"{embedder.model_id}+turn×{weight}"
        self.dimensions = embedder.dimensions

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        labels = tuple({label for *_, label in TURN_CONTEXT})
        parts = [[line for line in t.split("\n") if not line.startswith(labels)] for t in texts]
        own = self.embedder.encode(["\n".join(p) for p in parts])
        turn = ["\n".join(line for line in t.split("\n") if line.startswith(labels)) for t in texts]
        has = np.array([bool(t) for t in turn], dtype=bool)
        if has.any():
            own[has] += self.weight * self.embedder.encode([t for t in turn if t])
        return unit(own)


def pipeline(console: Console, embedder: MiniLMEmbedder | Combined, tmp: Path, name: str, table: bool = False) -> None:
    config = embedded_default(tmp / f"pipeline-{len(list(tmp.iterdir()))}.duckdb")
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        score_new_records(wh)
        cluster_new_records(wh, embedder)
        draft_clusters(config, wh)
        results = outcomes(wh.con)
        mixed = mixed_drafts(wh.con)
    if table:
        rows = Table(*HEADERS, title=f"The real pipeline on the embedded default ({name})")
        for outcome in results:
            rows.add_row(*outcome.row())
        console.print(rows)
    console.print(f"{name}: {sum(o.whole for o in results)} of {len(results)} planted problems are exactly one "
                  f"cluster and one draft; {len(mixed)} drafts mix planted keys: {mixed}")


def main() -> None:
    console = Console(width=200)
    embedder = MiniLMEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        compositions(console, embedder, Path(tmp))
        anchored(console, embedder, Path(tmp))
        pipeline(console, embedder, Path(tmp), "chosen composition", table=True)
        for weight in (0.25, 0.5, 0.7):
            pipeline(console, Combined(embedder, weight), Path(tmp), f"own ⊕ {weight} × turn lines")


if __name__ == "__main__":
    main()
