"""Read a file of reports into raw items: JSON Lines, a JSON array (or one object), Parquet.

A line that is not JSON is still an item (with its parse error), so it reaches quarantine
instead of vanishing. Blank lines are not items.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

from .processing import UNPARSED, RawItem

JSONL_SUFFIXES = {".jsonl", ".ndjson", ".jsonlines"}


class UnreadableFile(ValueError):
    """A file that cannot be read as a whole (a broken JSON document, a corrupt Parquet)."""


def file_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix == ".json":
        return "json"
    return "jsonl"


def read_items(path: Path | str) -> Iterator[RawItem]:
    """Every item in ``path`` (``-`` reads JSON Lines from standard input)."""
    if str(path) == "-":
        yield from jsonl_items(sys.stdin.buffer.read())
        return
    path = Path(path)
    kind = file_format(path)
    if kind == "parquet":
        yield from parquet_items(path)
    elif kind == "json":
        yield from json_items(path.read_bytes(), path)
    else:
        yield from jsonl_items(path.read_bytes())


def jsonl_items(data: bytes) -> Iterator[RawItem]:
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.strip()
        if not line:
            continue
        text = line.decode("utf-8", errors="replace")
        try:
            yield RawItem(orjson.loads(line), f"line {number}", text)
        except orjson.JSONDecodeError as exc:
            yield RawItem(UNPARSED, f"line {number}", text, f"not valid JSON: {exc}")


def json_items(data: bytes, path: Path) -> Iterator[RawItem]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # A broken document has no items to tell apart: it is quarantined whole.
        yield RawItem(UNPARSED, "document", data.decode("utf-8", errors="replace"), f"not valid JSON: {exc}")
        return
    if isinstance(document, list):
        for index, obj in enumerate(document):
            yield RawItem(obj, f"index {index}")
    else:
        yield RawItem(document, "document")


def parquet_items(path: Path) -> Iterator[RawItem]:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several unrelated types for a corrupt file
        raise UnreadableFile(f"{path}: not a readable Parquet file ({exc})") from exc
    for index, row in enumerate(frame.iter_rows(named=True)):
        yield RawItem({k: v for k, v in row.items() if v is not None}, f"row {index}")
