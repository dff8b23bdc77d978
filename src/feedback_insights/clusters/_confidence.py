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

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import polars as pl
from duckdb import DuckDBPyConnection

from ..config import ClusteringConfig
from ._algorithm import _inside_outside_similarity, _sums, background, unit
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


def cluster_quality(vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray | None = None,
                    only: Collection[int] | None = None) -> pl.DataFrame:
    """Per cluster of ``labels`` (ids ≥ 0; -1 = unclustered, counted as an outsider), or only
    the clusters ``only`` when given: ``cluster``, ``size``, ``cohesion``, ``separation``.
    ``vectors`` (and ``outsiders``, reports of the same partition outside every labelled
    cluster) are unit vectors, already centred. The other clusters still count as outsiders."""
    labels = np.asarray(labels, dtype=np.int64)
    if only is not None:
        labels = np.where(np.isin(labels, np.fromiter(only, np.int64)), labels, _ELSEWHERE)
    ids, sums, sizes = _sums(vectors, np.where(labels >= 0, labels, -1))
    if len(ids) == 0:
        return pl.DataFrame(schema={"cluster": pl.Int64, "size": pl.Int64, "cohesion": pl.Float64,
                                    "separation": pl.Float64})
    sizes = sizes.astype(np.int64)
    cohesion = ((sums**2).sum(axis=1) - sizes) / np.maximum(sizes * (sizes - 1), 1)
    rows = np.flatnonzero(labels >= 0)
    position = np.searchsorted(ids, labels[rows])
    _, nearest = _inside_outside_similarity(
        vectors, labels, outsiders, k=OUTSIDERS, approximate_from=APPROXIMATE_FROM, rows=rows
    )
    everything = len(vectors) + (0 if outsiders is None else len(outsiders))
    nearest = np.where(sizes[position] < everything, nearest[rows], 0.0)  # no outsider at all: 0
    outside = np.bincount(position, weights=nearest, minlength=len(ids)) / sizes
    return pl.DataFrame({"cluster": ids, "size": sizes, "cohesion": cohesion, "separation": cohesion - outside})


#: The label of reports in clusters not asked about: outsiders to the others, like the
#: unclustered, but below -1 so that no test of ``>= 0`` counts them.
_ELSEWHERE = -2
#: From how many vectors of a partition on the nearest outsiders come from an index (the clustering's default).
APPROXIMATE_FROM = ClusteringConfig().approximate_from


def confidence(
    vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray | None = None, rule: ConfidenceRule = RULE,
    only: Collection[int] | None = None,
) -> pl.DataFrame:
    """:func:`cluster_quality` with ``confidence`` and ``needs_review`` per cluster (of ``only``, when given)."""
    quality = cluster_quality(unit(vectors), labels, None if outsiders is None else unit(outsiders), only)
    scores = rule.confidence(
        quality.get_column("cohesion").to_numpy(), quality.get_column("separation").to_numpy(),
        quality.get_column("size").to_numpy().astype(np.float64),
    )
    return quality.with_columns(
        pl.Series("confidence", scores, pl.Float64), pl.Series("needs_review", rule.needs_review(scores))
    )


_VIEW_ROWS = """
SELECT coalesce(m.cluster_id, -1) AS cluster_id, coalesce(c.service, r.service) AS service,
       coalesce(c.polarity, {polarity}) AS polarity, m.text_sha256{vector}  -- a moved report is in its cluster's partition
FROM cluster_members m
JOIN records r USING (collector, id)
JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
LEFT JOIN clusters c ON c.id = m.cluster_id
WHERE m.view = $view AND coalesce(c.status, '') <> 'merged'
ORDER BY m.collector, m.id
"""


@dataclass(frozen=True, slots=True)
class ViewVectors:
    """A view's vectors a clustering run already holds (``text_sha256`` row for row with
    ``vectors``) and the view's centre: describing what the run touched need not load and centre
    every vector of the view a second time."""

    text_sha256: pl.Series
    vectors: np.ndarray
    centre: np.ndarray


def stored_confidence(con: DuckDBPyConnection, model: str, view: str, ids: list[int], polarity: str,
                      rule: ConfidenceRule = RULE, held: ViewVectors | None = None) -> pl.DataFrame:
    """:func:`confidence` of the clusters ``ids`` as the warehouse holds them: every embedded
    report of the view centred on the view's background (as the algorithm centres it), each
    cluster judged within its partition (``polarity`` is the SQL that tells a record's). Empty
    when nothing is embedded with ``model``. ``held``: the run's own vectors, when every row's
    text is among them (else they are loaded)."""
    centred, rows = _held(con, model, view, polarity, held) if held is not None else (None, None)
    if centred is None or rows is None:
        table = con.sql(_VIEW_ROWS.format(polarity=polarity, vector=", e.vector"),
                        params={"model": model, "view": view}).to_arrow_table()
        if table.num_rows == 0:
            return confidence(np.empty((0, 1), np.float32), np.empty(0, np.int64), rule=rule).rename({"cluster": "id"})
        vectors = to_matrix(table.column("vector"))
        centred = unit(unit(vectors) - background(vectors))
        rows = pl.DataFrame(table.drop(["vector", "text_sha256"])).with_row_index("row")
    wanted = rows.filter(pl.col("cluster_id").is_in(ids)).select("service", "polarity").unique()
    parts = [
        confidence(centred[part.get_column("row").to_numpy()], part.get_column("cluster_id").to_numpy(), rule=rule,
                   only=ids)
        for part in rows.join(wanted, on=["service", "polarity"], nulls_equal=True).partition_by("service", "polarity")
    ]
    found = pl.concat(parts) if parts else confidence(np.empty((0, 1), np.float32), np.empty(0, np.int64), rule=rule)
    return found.filter(pl.col("cluster").is_in(ids)).rename({"cluster": "id"})


def _held(con: DuckDBPyConnection, model: str, view: str, polarity: str, held: ViewVectors
          ) -> tuple[np.ndarray | None, pl.DataFrame | None]:
    """The centred vectors and rows of :func:`stored_confidence` from ``held``; (None, None) when
    some row's text is not among them."""
    rows = con.sql(_VIEW_ROWS.format(polarity=polarity, vector=""), params={"model": model, "view": view}).pl()
    index = pl.DataFrame({"text_sha256": held.text_sha256, "at": np.arange(len(held.text_sha256))})
    at = rows.select("text_sha256").join(index.unique("text_sha256", keep="first"), on="text_sha256",
                                         how="left", maintain_order="left").get_column("at")
    if at.null_count() or rows.is_empty():
        return None, None
    centred = unit(unit(held.vectors[at.to_numpy()]) - held.centre)
    return centred, rows.drop("text_sha256").with_row_index("row")
