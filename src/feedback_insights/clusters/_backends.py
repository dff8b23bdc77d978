"""Which embedder a configuration asks for, and which model a warehouse's clusters are in.

The backend (``[embedding] backend``: ONNX Runtime by default, torch as the fallback) and the
precision are part of the model id, so vectors of two backends never mix in one clustering. What
a maintainer's correction or an erasure describes again must be read in the space the clusters
were made in, which the warehouse knows better than any default: :func:`members_model`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from duckdb import DuckDBPyConnection

from ..config import EmbeddingConfig
from ._embedding import Embedder, MiniLMEmbedder
from ._onnx import OnnxMiniLMEmbedder


def embedder_for(settings: EmbeddingConfig = EmbeddingConfig()) -> Embedder:
    """The packaged model on the configured backend."""
    return OnnxMiniLMEmbedder(settings) if settings.backend == "onnx" else MiniLMEmbedder(settings)


def packaged(model_id: str) -> Embedder | None:
    """An embedder of ``model_id`` when it is the packaged model on one of our backends (loaded
    only when first asked to encode), else None."""
    for settings in (EmbeddingConfig(backend="torch"), EmbeddingConfig(), EmbeddingConfig(precision="int8")):
        if embedder_for(settings).model_id == model_id:
            return _Lazy(settings, model_id)
    return None


class _Lazy:
    """The packaged model, built on first use: describing clusters mostly finds its phrases cached."""

    dimensions = MiniLMEmbedder.dimensions

    def __init__(self, settings: EmbeddingConfig, model_id: str) -> None:
        self.settings, self.model_id = settings, model_id

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        return embedder_for(self.settings).encode(texts, on_batch)


def members_model(con: DuckDBPyConnection, view: str) -> str:
    """The model whose vectors a view's cluster members have (the most of them, after a change
    of backend); the packaged model's default id for a view with none."""
    rows = con.execute(
        """SELECT e.model FROM cluster_members m JOIN embeddings e ON e.text_sha256 = m.text_sha256
           WHERE m.view = ? AND m.cluster_id IS NOT NULL GROUP BY e.model ORDER BY count(*) DESC, e.model LIMIT 1""",
        [view],
    ).fetchall()
    return rows[0][0] if rows else embedder_for().model_id
