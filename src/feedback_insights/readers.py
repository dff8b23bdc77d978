"""Read a file of reports into raw items: JSON Lines, a JSON array (or one object), Parquet.

A line that is not JSON is still an item (with its parse error), so it reaches quarantine
instead of vanishing. Blank lines are not items. JSON Lines are handed on unparsed: parsing is
part of the work that ingestion spreads over worker processes.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson

from . import jsontext
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
    seen: Counter[bytes] = Counter()
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.strip()
        if not line:
            continue
        copies = seen[line]
        seen[line] = copies + 1
        yield RawItem.line(line, f"line {number}", copies)


def _with_occurrences(items: Iterator[RawItem]) -> Iterator[RawItem]:
    """Number identical parsed items (key order aside) in the order they came."""
    seen: Counter[bytes] = Counter()
    for item in items:
        key = jsontext.dumps(item.obj, sort_keys=True)
        item.occurrence = seen[key]
        seen[key] += 1
        yield item


def json_items(data: bytes, path: Path) -> Iterator[RawItem]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # A broken document has no items to tell apart: it is quarantined whole.
        yield RawItem(UNPARSED, "document", data.decode("utf-8", errors="replace"), f"not valid JSON: {exc}")
        return
    if isinstance(document, list):
        yield from _with_occurrences(RawItem(obj, f"index {index}") for index, obj in enumerate(document))
    else:
        yield RawItem(document, "document")


def parquet_items(path: Path) -> Iterator[RawItem]:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several unrelated types for a corrupt file
        raise UnreadableFile(f"{path}: not a readable Parquet file ({exc})") from exc
    rows = frame.iter_rows(named=True)
    yield from _with_occurrences(
        RawItem({k: v for k, v in row.items() if v is not None}, f"row {index}") for index, row in enumerate(rows)
    )
