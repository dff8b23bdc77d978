"""Read a file of reports into raw items: JSON Lines, a JSON array (or one object), Parquet.

A line that is not JSON is still an item (with its parse error), so it reaches quarantine
instead of vanishing. Blank lines are not items. JSON Lines are handed on unparsed: parsing is
part of the work that ingestion spreads over worker processes.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import orjson

from ..config import DEFAULT_BATCH_SIZE
from ..core import jsontext
from ._raw import UNPARSED, RawItem


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
    for block in read_blocks(path, DEFAULT_BATCH_SIZE):
        yield from block


def read_blocks(path: Path | str, size: int) -> Iterator[list[RawItem] | LineBlock]:
    """The items of ``path`` in blocks of at most ``size``. JSON Lines come as
    :class:`LineBlock` objects: unparsed lines are far cheaper to hand to a worker process than
    one object per item."""
    if str(path) == "-":
        yield from jsonl_blocks(sys.stdin.buffer.read(), size)
        return
    path = Path(path)
    kind = file_format(path)
    if kind == "jsonl":
        yield from jsonl_blocks(path.read_bytes(), size)
        return
    items = parquet_items(path) if kind == "parquet" else json_items(path.read_bytes(), path)
    while block := list(islice(items, size)):
        yield block


@dataclass(slots=True)
class LineBlock:
    """Consecutive JSON Lines, not parsed yet: their numbers, bytes and how many identical
    lines came before each in the file (see ``RawItem.occurrence``)."""

    numbers: list[int] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    occurrences: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[RawItem]:
        for number, line, copies in zip(self.numbers, self.lines, self.occurrences, strict=True):
            yield RawItem.line(line, f"line {number}", copies)


def jsonl_blocks(data: bytes, size: int) -> Iterator[LineBlock]:
    # Lines are counted by their hash, not kept: a collision could only number a different
    # report's copy, whose id differs anyway (ids include the content digest).
    seen: Counter[int] = Counter()
    block = LineBlock()
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.strip()
        if not line:
            continue
        key = hash(line)
        copies = seen[key]
        seen[key] = copies + 1
        block.numbers.append(number)
        block.lines.append(line)
        block.occurrences.append(copies)
        if len(block) == size:
            yield block
            block = LineBlock()
    if block.lines:
        yield block


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
