"""What a filed problem means, in the embedding space: how a new report is recognised as it.

A filed cluster is represented by its centroid: the mean of its members' unit vectors, made unit
again. A report is that problem when its vector's cosine to the centroid reaches the threshold
(``[embedding] known_issue_similarity``); among several problems of its service, the nearest one
that does. The pipeline publishes the centroid with each known issue (:meth:`Meaning.as_json`:
the model that made it, the threshold), a collector reads it back (:meth:`Meaning.from_json`) and
scores a submission exactly as :func:`recognised` does here, and the desk's lookalikes ask the same
question of the reports of clusters not filed yet: one measure, so what the desk calls "possibly
the same" is what an agent would be told is known.

Why the centroid and not the nearest member or the nearest few: on the shared corpora
(``benchmarks/known_issues.py``: clinc150, hwu64, bug_duplicates; 50 labels filed, half of each
label's texts publishing, the other half and the unfiled labels asking) the three recognise
within a point or two of each other at a 5 % false-known rate (README, "Known issues"); one
vector is what a collector scores 50 known issues with in microseconds, and it says less about
any one report than that report's own vector would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..clusters import members_model, to_matrix
from ..warehouse import Warehouse

#: The backends whose vectors are the same vectors (cosine 1.00000, ``benchmarks/embed_speed.py``):
#: torch and ONNX fp32 of the packaged model. int8 moves them; another model is another space.
_SAME_VECTORS = "+onnx-fp32"
#: The longest vector a published centroid may have (MiniLM's is 384).
MAX_DIMENSIONS = 4096


def vector_space(model_id: str) -> str:
    """The space a model id's vectors live in: the torch and ONNX fp32 backends share one."""
    return model_id.removesuffix(_SAME_VECTORS)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


@dataclass(frozen=True, slots=True)
class Meaning:
    """A filed problem in the embedding space: the unit centroid of its reports, the model that
    embedded them and the cosine a report needs to it."""

    model: str
    centroid: np.ndarray
    threshold: float

    @classmethod
    def of_members(cls, model: str, vectors: np.ndarray, threshold: float) -> Meaning:
        return cls(model, unit_rows(unit_rows(vectors).mean(axis=0)), threshold)

    def as_json(self) -> dict[str, Any]:
        """The published form (``match.meaning`` of a known issue)."""
        return {"model": self.model, "threshold": self.threshold,
                "centroid": [round(float(x), 6) for x in self.centroid]}

    @classmethod
    def from_json(cls, published: Mapping[str, Any]) -> Meaning | None:
        """The representation a known issue carries, or None when it carries none that reads
        (no model, a threshold out of range, a centroid that is not a finite, non-zero vector):
        such an issue is matched by its record ids and terms only."""
        model, threshold, centroid = published.get("model"), published.get("threshold"), published.get("centroid")
        if not (isinstance(model, str) and isinstance(threshold, int | float) and not isinstance(threshold, bool)
                and isinstance(centroid, list)):
            return None
        if not (-1 < threshold < 1 and 0 < len(centroid) <= MAX_DIMENSIONS):
            return None
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in centroid):
            return None
        vector = np.array(centroid, dtype=np.float64)
        if not np.isfinite(vector).all() or not np.linalg.norm(vector):
            return None
        return cls(model, unit_rows(vector), float(threshold))


def similarities(vectors: np.ndarray, meanings: Sequence[Meaning]) -> np.ndarray:
    """(reports, problems): each report's cosine to each problem's centroid."""
    if not meanings:
        return np.empty((len(vectors), 0), dtype=np.float32)
    return np.asarray(vectors, dtype=np.float32) @ np.stack([m.centroid for m in meanings]).T


def recognised(vectors: np.ndarray, meanings: Sequence[Meaning]) -> tuple[np.ndarray, np.ndarray]:
    """For each report (unit rows): the index of the problem it is (-1: none reaches its
    threshold) and its cosine to that problem: the nearest problem that reaches its threshold."""
    if not meanings:
        return np.full(len(vectors), -1), np.full(len(vectors), -1.0, dtype=np.float32)
    scores = similarities(vectors, meanings)
    thresholds = np.array([m.threshold for m in meanings], dtype=np.float32)
    passing = np.where(scores >= thresholds, scores, -np.inf)
    chosen = passing.argmax(axis=1)
    rows = np.arange(len(vectors))
    found = np.isfinite(passing[rows, chosen])
    return np.where(found, chosen, -1), np.where(found, scores[rows, chosen], -1.0)


#: Every clustered report's vector in ``model``'s space, by cluster.
_MEMBER_VECTORS = """
SELECT m.cluster_id, m.collector || ':' || m.id AS record, e.vector
FROM cluster_members m JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
WHERE m.view = 'reports' AND list_contains($clusters, m.cluster_id)
ORDER BY m.cluster_id, m.collector, m.id
"""


def member_vectors(warehouse: Warehouse, model: str, clusters: Sequence[int]) -> dict[int, tuple[list[str], np.ndarray]]:
    """The reports (``collector:id``) of each of ``clusters`` that have a vector, with their unit
    vectors in ``model``'s space."""
    table = warehouse.con.sql(_MEMBER_VECTORS, params={"model": model, "clusters": list(clusters)}).to_arrow_table()
    if not table.num_rows:
        return {}
    ids, records, vectors = table.column("cluster_id").to_numpy(), table.column("record").to_pylist(), unit_rows(
        to_matrix(table.column("vector")))
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    return {int(ids[s]): (records[s:e], vectors[s:e]) for s, e in zip(starts, ends, strict=True)}


def cluster_meanings(warehouse: Warehouse, clusters: Sequence[int], threshold: float) -> dict[int, Meaning]:
    """Each cluster's representation, in the space its members were clustered in (clusters with
    no vector have none)."""
    model = members_model(warehouse.con, "reports")
    return {cluster: Meaning.of_members(model, vectors, threshold)
            for cluster, (_, vectors) in member_vectors(warehouse, model, clusters).items()}
