"""How far a cluster can be trusted: a confidence from its cohesion, separation and size.

The clustering gate (``clusters/_algorithm.py``, step 7) keeps or dissolves a cluster; what it
keeps still ranges from thirty reports that all say the same thing to two look-alike reports
in a crowded region. The confidence puts that on one scale so a maintainer knows which
clusters to read before trusting them, and the drafting stage knows which not to draft on its
own.

The quantities are those of the first-pass gate (step 7), on the same centred vectors (the view's
background removed):

- **cohesion** ``c``: the mean pairwise cosine of the members;
- **separation** ``s``: ``c`` minus the members' mean cosine to their ten nearest reports
  outside the cluster (clustered elsewhere or not at all) — how much more alike the members
  are to each other than to what surrounds them;
- **size** ``n``: the number of members.

The rule (:data:`RULE`; README, "Clusters and demand")::

    confidence = min(1, s / 0.15) × min(1, c / 0.5) × n / (n + 2)

each factor in [0, 1] (a negative ``s`` gives 0): a cluster clearly apart from what surrounds
it, as alike inside as a typical duplicate group, and large enough not to be a coincidence —
the size factor counts the cluster as if it had two more members alike to nothing, so a pair
scores at most 0.5, three members 0.6, ten 0.83. A cluster whose confidence is at most
``needs_review_at`` (0.5) **needs review**: flagged in ``clusters list``/``show`` and the
digest, and not drafted automatically. A pair therefore always needs review (two look-alike
reports are too little to act on alone: among the 93 pairs our clustering makes of the bug
tracker corpus, 90 are not duplicates).

Separation is what tells pure clusters from mixed ones on every corpus we measured (cohesion a
little, size not at all: big clusters collect one stray more often); the thresholds are round
figures, not fitted. ``benchmarks/cluster_confidence.py`` prints purity by confidence band on
clinc150, hwu64 and bug_duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from duckdb import DuckDBPyConnection

from ._algorithm import background, unit
from ._embedding import to_matrix

#: How many nearest outsiders a member is compared with (the gate's number).
OUTSIDERS = 10


@dataclass(frozen=True, slots=True)
class ConfidenceRule:
    """The thresholds of the confidence rule (module docstring)."""

    full_separation: float = 0.15
    full_cohesion: float = 0.5
    prior_members: int = 2
    needs_review_at: float = 0.5

    def confidence(self, cohesion: np.ndarray, separation: np.ndarray, size: np.ndarray) -> np.ndarray:
        apart = np.clip(separation / self.full_separation, 0, 1)
        alike = np.clip(cohesion / self.full_cohesion, 0, 1)
        return apart * alike * size / (size + self.prior_members)

    def needs_review(self, confidence: np.ndarray) -> np.ndarray:
        return confidence <= self.needs_review_at + 1e-9


RULE = ConfidenceRule()


def cluster_quality(vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray | None = None) -> pl.DataFrame:
    """Per cluster of ``labels`` (ids ≥ 0; -1 = unclustered, counted as an outsider): ``cluster``,
    ``size``, ``cohesion``, ``separation``. ``vectors`` (and ``outsiders``, reports of the same
    partition outside every labelled cluster) are unit vectors, already centred."""
    labels = np.asarray(labels, dtype=np.int64)
    ids, inverse, sizes = np.unique(labels[labels >= 0], return_inverse=True, return_counts=True)
    if len(ids) == 0:
        return pl.DataFrame(schema={"cluster": pl.Int64, "size": pl.Int64, "cohesion": pl.Float64,
                                    "separation": pl.Float64})
    clustered = np.flatnonzero(labels >= 0)
    sums = np.zeros((len(ids), vectors.shape[1]))
    np.add.at(sums, inverse, vectors[clustered])
    cohesion = ((sums**2).sum(axis=1) - sizes) / np.maximum(sizes * (sizes - 1), 1)
    outside = np.bincount(inverse, weights=_outside(vectors, labels, outsiders)[clustered], minlength=len(ids)) / sizes
    return pl.DataFrame({"cluster": ids, "size": sizes, "cohesion": cohesion, "separation": cohesion - outside})


def _outside(vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray | None, block: int = 2048) -> np.ndarray:
    """Each clustered vector's mean cosine to its :data:`OUTSIDERS` nearest vectors outside its
    own cluster (``outsiders`` included); 0 where there are none, and for unclustered rows."""
    import torch

    extra = outsiders if outsiders is not None else np.empty((0, vectors.shape[1]), np.float32)
    everything = torch.from_numpy(np.ascontiguousarray(np.vstack([vectors, extra]), dtype=np.float32))
    every_label = torch.from_numpy(np.concatenate([labels, np.full(len(extra), -1, dtype=np.int64)]))
    out = np.zeros(len(vectors))
    members = np.flatnonzero(labels >= 0)
    k = min(OUTSIDERS, len(everything))
    for start in range(0, len(members), block):
        rows = members[start : start + block]
        scores = everything[rows] @ everything.T
        scores[every_label[rows][:, None] == every_label[None, :]] = -float("inf")
        values = torch.topk(scores, k, dim=1).values.numpy()
        finite = np.isfinite(values)
        out[rows] = np.where(finite, values, 0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
    return out


def confidence(
    vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray | None = None, rule: ConfidenceRule = RULE
) -> pl.DataFrame:
    """:func:`cluster_quality` with ``confidence`` and ``needs_review`` per cluster."""
    quality = cluster_quality(unit(vectors), labels, None if outsiders is None else unit(outsiders))
    scores = rule.confidence(
        quality.get_column("cohesion").to_numpy(), quality.get_column("separation").to_numpy(),
        quality.get_column("size").to_numpy().astype(np.float64),
    )
    return quality.with_columns(
        pl.Series("confidence", scores, pl.Float64), pl.Series("needs_review", rule.needs_review(scores))
    )


_VIEW_VECTORS = """
SELECT coalesce(m.cluster_id, -1) AS cluster_id, coalesce(c.service, r.service) AS service,
       coalesce(c.polarity, {polarity}) AS polarity, e.vector  -- a moved report is in its cluster's partition
FROM cluster_members m
JOIN records r USING (collector, id)
JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
LEFT JOIN clusters c ON c.id = m.cluster_id
WHERE m.view = $view AND coalesce(c.status, '') <> 'merged'
ORDER BY m.collector, m.id
"""


def stored_confidence(con: DuckDBPyConnection, model: str, view: str, ids: list[int], polarity: str,
                      rule: ConfidenceRule = RULE) -> pl.DataFrame:
    """:func:`confidence` of the clusters ``ids`` as the warehouse holds them: every embedded
    report of the view centred on the view's background (as the algorithm centres it), each
    cluster judged within its partition (``polarity`` is the SQL that tells a record's). Empty
    when nothing is embedded with ``model``."""
    table = con.sql(_VIEW_VECTORS.format(polarity=polarity), params={"model": model, "view": view}).to_arrow_table()
    if table.num_rows == 0:
        return confidence(np.empty((0, 1), np.float32), np.empty(0, np.int64), rule=rule).rename({"cluster": "id"})
    vectors = to_matrix(table.column("vector"))
    centred = unit(unit(vectors) - background(vectors))
    rows = pl.DataFrame(table.drop(["vector"])).with_row_index("row")
    wanted = rows.filter(pl.col("cluster_id").is_in(ids)).select("service", "polarity").unique()
    parts = [
        confidence(centred[part.get_column("row").to_numpy()], part.get_column("cluster_id").to_numpy(), rule=rule)
        for part in rows.join(wanted, on=["service", "polarity"], nulls_equal=True).partition_by("service", "polarity")
    ]
    found = pl.concat(parts) if parts else confidence(np.empty((0, 1), np.float32), np.empty(0, np.int64), rule=rule)
    return found.filter(pl.col("cluster").is_in(ids)).rename({"cluster": "id"})
