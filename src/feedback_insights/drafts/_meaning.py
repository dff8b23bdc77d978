"""What a filed problem means, in the embedding space: how a new report is recognised as it.

A filed cluster is represented by some of its members' vectors (all of them, up to
:data:`MAX_REPRESENTATIVES`; beyond that a spread of them, farthest-point from the medoid). A
report is that problem when its vector's cosine to the nearest representative reaches the
threshold (``[embedding] known_issue_similarity``); among several problems of its service, the
nearest one. The pipeline publishes the representation with each known issue (:meth:`Meaning.as_json`,
float16 in base64, with the model that made it and the threshold), the collector reads it back
(:meth:`Meaning.from_json`) and scores a submission exactly as :func:`best` does here, and the
desk's lookalikes ask the same question of the reports of clusters not filed yet. One measure,
so what the desk calls "possibly the same" is what an agent would be told is known.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..clusters import members_model, to_matrix
from ..warehouse import Warehouse

#: The most member vectors published per known issue: 32 × 384 float16 is 24 KiB, so 50 known
#: issues cost a collector ~1.2 MB and a submission 1,600 dot products.
MAX_REPRESENTATIVES = 32

#: The backends whose vectors are the same vectors (cosine 1.00000, ``benchmarks/embed_speed.py``):
#: torch and ONNX fp32 of the packaged model. int8 moves them; another model is another space.
_SAME_VECTORS = "+onnx-fp32"


def vector_space(model_id: str) -> str:
    """The space a model id's vectors live in: the torch and ONNX fp32 backends share one."""
    return model_id.removesuffix(_SAME_VECTORS)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def representatives(vectors: np.ndarray, limit: int = MAX_REPRESENTATIVES) -> np.ndarray:
    """Which rows of a cluster's (unit) vectors stand for it: all, when there are at most
    ``limit``; else the medoid (nearest the centroid) and then, each time, the member farthest
    from those chosen, so the published few cover every way the problem was worded."""
    if len(vectors) <= limit:
        return np.arange(len(vectors))
    centroid = vectors.mean(axis=0)
    chosen = [int(np.argmax(vectors @ centroid))]
    nearest = vectors @ vectors[chosen[0]]
    while len(chosen) < limit:
        chosen.append(int(np.argmin(nearest)))
        nearest = np.maximum(nearest, vectors @ vectors[chosen[-1]])
    return np.array(sorted(chosen))


@dataclass(frozen=True, slots=True)
class Meaning:
    """A filed problem in the embedding space: its representatives (unit rows), the model that
    embedded them and the cosine a report needs to the nearest one."""

    model: str
    vectors: np.ndarray
    threshold: float

    @classmethod
    def of_members(cls, model: str, vectors: np.ndarray, threshold: float) -> Meaning:
        rows = unit_rows(vectors)
        return cls(model, rows[representatives(rows)], threshold)

    def as_json(self) -> dict[str, Any]:
        """The published form (``match.meaning`` of a known issue): float16 little-endian rows
        in base64, about 1 KB per representative."""
        data = self.vectors.astype("<f2").tobytes()
        return {"model": self.model, "dimensions": int(self.vectors.shape[1]), "threshold": self.threshold,
                "vectors": base64.b64encode(data).decode("ascii")}

    @classmethod
    def from_json(cls, published: Mapping[str, Any]) -> Meaning | None:
        """The representation a known issue carries, or None when it carries none that reads
        (wrong length, not base64, not finite): such an issue is matched by its terms only."""
        try:
            dimensions = int(published["dimensions"])
            raw = base64.b64decode(published["vectors"], validate=True)
            threshold = float(published["threshold"])
            model = str(published["model"])
        except (KeyError, TypeError, ValueError, binascii.Error):
            return None
        if dimensions < 1 or not raw or len(raw) % (2 * dimensions):
            return None
        vectors = np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(-1, dimensions)
        if not np.isfinite(vectors).all() or not -1 < threshold < 1:
            return None
        return cls(model, unit_rows(vectors), threshold)


def similarities(vectors: np.ndarray, meanings: Sequence[Meaning]) -> np.ndarray:
    """(reports, problems): each report's cosine to each problem's nearest representative."""
    out = np.full((len(vectors), len(meanings)), -1.0, dtype=np.float32)
    for column, meaning in enumerate(meanings):
        if len(vectors) and len(meaning.vectors):
            out[:, column] = (vectors @ meaning.vectors.T).max(axis=1)
    return out


def best(vectors: np.ndarray, meanings: Sequence[Meaning]) -> tuple[np.ndarray, np.ndarray]:
    """For each report (unit rows): the index of the problem it is (-1: none reaches its
    threshold) and its cosine to that problem. The nearest problem that reaches its threshold."""
    scores = similarities(vectors, meanings)
    if not meanings:
        return np.full(len(vectors), -1), np.full(len(vectors), -1.0, dtype=np.float32)
    thresholds = np.array([m.threshold for m in meanings], dtype=np.float32)
    passing = np.where(scores >= thresholds, scores, -np.inf)
    chosen = passing.argmax(axis=1)
    found = np.isfinite(passing[np.arange(len(vectors)), chosen])
    return np.where(found, chosen, -1), np.where(found, scores[np.arange(len(vectors)), chosen], -1.0)


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
