"""The stateless ``cluster`` and ``embed`` commands: a file in, one line or row out per input.

``cluster`` uses the pipeline's embedder and :func:`place` exactly as a first run on an empty
warehouse would (partitioned by service and polarity when the inputs are canonical records),
so evaluating this command evaluates the pipeline's clustering. ``embed`` hands out the
vectors themselves, from the same embedder and the same text, for people's own analysis.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ..config import ClusteringConfig
from ..ingest import UNPARSED, read_items
from ._algorithm import background, place
from ._embedding import Embedder, record_text
from ._stage import POLARITY_BY_LANE
from ._versions import version, with_overrides


class InputError(ValueError):
    """An input line that cannot be clustered; the message names the line and field."""


def read_inputs(path: Path, text_field: str, id_field: str) -> pl.DataFrame:
    """``id``, ``text``, ``service`` and ``polarity`` of every input (JSON Lines, a JSON array
    or Parquet, as every command reads them), or an :class:`InputError`."""
    rows = []
    for item in read_items(path):
        item.parse()
        where = _where(path, item.position)
        if item.obj is UNPARSED:
            raise InputError(f"{where}: not JSON ({(item.parse_error or '').removeprefix('not valid JSON: ')})")
        if not isinstance(item.obj, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(item.obj).__name__}")
        rows.append(_row(item.obj, where, text_field, id_field))
    seen: set[str] = set()
    for row in rows:
        if row["id"] in seen:
            raise InputError(f"{path}: {id_field} {row['id']!r} appears more than once")
        seen.add(row["id"])
    return pl.DataFrame(rows, schema={"id": pl.String, "text": pl.String, "service": pl.String, "polarity": pl.String})


def _where(path: Path, position: str) -> str:
    """``file:3`` for the third line of JSON Lines, ``file index 3`` or ``file row 3`` otherwise."""
    line = position.removeprefix("line ")
    return f"{path}:{line}" if line != position else f"{path} {position}"


def _row(obj: dict, where: str, text_field: str, id_field: str) -> dict:
    record_id = obj.get(id_field)
    if not isinstance(record_id, (str, int)) or isinstance(record_id, bool) or record_id == "":
        raise InputError(f"{where}: {id_field}: required, a non-empty string or integer")
    if text_field in obj:
        text = obj[text_field]
        if text is not None and not isinstance(text, str):
            raise InputError(f"{where}: {text_field}: expected a string, got {type(text).__name__}")
    else:  # a canonical record: the pipeline's composition
        text = record_text(obj)
    return {
        "id": str(record_id),
        "text": text.strip() if text and text.strip() else None,
        "service": obj.get("service") if isinstance(obj.get("service"), str) else None,
        "polarity": POLARITY_BY_LANE.get(lane, "problem") if isinstance(lane := obj.get("lane"), str) else "problem",
    }


def cluster_inputs(inputs: pl.DataFrame, embedder: Embedder, settings: ClusteringConfig) -> pl.DataFrame:
    """``id`` and ``cluster_id`` (1, 2, … in order of first appearance; null = unclustered).
    ``settings.version`` picks the released defaults; knobs set explicitly apply on top."""
    settings = with_overrides(version(settings.version), settings).settings
    inputs = inputs.with_row_index("row")
    with_text = inputs.filter(pl.col("text").is_not_null())
    vectors = embedder.encode(with_text.get_column("text").to_list())
    cluster_of = np.full(inputs.height, -1, dtype=np.int64)
    next_id = 0
    empty = np.empty((0, vectors.shape[1]), dtype=np.float32)
    centre = background(vectors)  # one centre for all partitions, as in the pipeline
    for _, part in with_text.with_row_index("vec").group_by("service", "polarity", maintain_order=True):
        placement = place(vectors[part.get_column("vec").to_numpy()], empty, np.empty(0, np.int64), settings, centre)
        local = placement.new
        cluster_of[part.get_column("row").to_numpy()] = np.where(local >= 0, local + next_id, -1)
        next_id += placement.new_count
    return inputs.select("id").with_columns(
        pl.Series("cluster_id", _first_appearance(cluster_of), dtype=pl.Int64)
    )


def _first_appearance(labels: np.ndarray) -> list[int | None]:
    """Renumber 1, 2, … by first appearance so the output does not depend on partition order."""
    numbers: dict[int, int] = {}
    out: list[int | None] = []
    for label in labels.tolist():
        if label < 0:
            out.append(None)
        else:
            out.append(numbers.setdefault(label, len(numbers) + 1))
    return out


def write_outputs(frame: pl.DataFrame, path: Path) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in frame.iter_rows(named=True)))


def embed_inputs(inputs: pl.DataFrame, embedder: Embedder, on_batch: Callable[[int], None] | None = None) -> pa.Table:
    """``id`` and ``vector`` (``dimensions`` float32; null for an input with no text), one row
    per input, in order."""
    has_text = inputs.get_column("text").is_not_null().to_numpy()
    found = embedder.encode(inputs.filter(pl.col("text").is_not_null()).get_column("text").to_list(), on_batch)
    flat = np.zeros((inputs.height, embedder.dimensions), dtype=np.float32)
    flat[has_text] = found
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel(), pa.float32()), embedder.dimensions,
                                                mask=pa.array(~has_text))
    return pa.table({"id": pa.array(inputs.get_column("id").to_list(), pa.string()), "vector": vectors})


def write_vectors(table: pa.Table, path: Path, model_id: str) -> None:
    """Parquet, with the model id in the file's metadata (``feedback_insights.model``)."""
    pq.write_table(table.replace_schema_metadata({"feedback_insights.model": model_id}), path)
