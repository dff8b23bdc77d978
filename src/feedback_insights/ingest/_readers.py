"""Read a file of reports into raw items: JSON Lines, a JSON array (or one object), Parquet.

A line that is not JSON is still an item (with its parse error), so it reaches quarantine
instead of vanishing. Blank lines are not items. JSON Lines are handed on unparsed: parsing is
part of the work that ingestion spreads over worker processes.

Files are streamed, so memory grows with the batch size, not with the file: JSON Lines line by
line (a line longer than :data:`MAX_LINE_BYTES` is cut there and quarantined, its tail never
held), Parquet one record batch at a time. A JSON document has to be parsed whole, so one over
:data:`MAX_DOCUMENT_BYTES` is refused (:class:`UnreadableFile`): large drops belong in JSON Lines.
What is remembered per file is a small hash per line, to number identical lines.

Only regular files are read (:func:`open_regular`), judged on the opened descriptor so that
nothing can be swapped in between a check and the open: never a symbolic link (a file drop
resolves the links that stay inside it first), a device, a FIFO, a socket, or a file of /proc or
/sys, whose bytes are made up for the reader (a process's environment, its memory).
"""

from __future__ import annotations

import errno
import functools
import io
import os
import stat
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import orjson

from ..config import DEFAULT_BATCH_SIZE
from ..core import jsontext
from ._raw import UNPARSED, RawItem

if TYPE_CHECKING:
    import pyarrow as pa

#: The longest line kept: far over any body limit (AFP's is 16 KiB), so only an abuse is cut.
MAX_LINE_BYTES = 1 << 20
#: The largest JSON document (an array of reports, or one) that is read: it is parsed whole.
MAX_DOCUMENT_BYTES = 64 << 20
#: How much of a line that was cut is kept in quarantine, to recognise it by.
KEPT_OF_A_CUT_LINE = 1024


class UnreadableFile(ValueError):
    """A file that cannot be read as a whole (a broken JSON document, a corrupt Parquet, a
    file that is not a regular file)."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


@functools.cache
def _pseudo_file_systems() -> frozenset[int]:
    """The devices of /proc and /sys, whose files look regular."""
    devices = set()
    for root in ("/proc", "/sys"):
        try:
            devices.add(os.stat(root).st_dev)
        except OSError:  # not Linux, or not mounted: nothing of theirs can be read either
            pass
    return frozenset(devices)


def open_regular(path: Path) -> io.BufferedReader:
    """``path`` open for reading, if it is a regular file and not a link; else
    :class:`UnreadableFile` saying what it is. ``O_NONBLOCK`` keeps a FIFO from stalling the
    open until a writer comes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnreadableFile(f"{path}: is a symbolic link, not followed") from None
        raise
    try:
        info = os.fstat(fd)
        kind = next((name for test, name in _KINDS if test(info.st_mode)), None)
        if kind is None and info.st_dev in _pseudo_file_systems():
            kind = "on /proc or /sys"
        if kind is not None:
            raise UnreadableFile(f"{path}: is {kind}, not a regular file; only regular files are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def file_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix == ".json":
        return "json"
    return "jsonl"


def read_items(path: Path | str) -> Iterator[RawItem]:
    """Every item in ``path`` (``-`` reads JSON Lines from standard input). The path is one
    someone named (on the command line, say), so a symbolic link in it is followed first."""
    for block in read_blocks(path if str(path) == "-" else Path(path).resolve(), DEFAULT_BATCH_SIZE):
        yield from block


def read_blocks(path: Path | str, size: int) -> Iterator[list[RawItem] | LineBlock]:
    """The items of ``path`` in blocks of at most ``size``. JSON Lines come as
    :class:`LineBlock` objects: unparsed lines are far cheaper to hand to a worker process than
    one object per item. Only a regular file is read (:func:`open_regular`)."""
    if str(path) == "-":
        yield from jsonl_blocks(sys.stdin.buffer, size)
        return
    path = Path(path)
    kind = file_format(path)
    with open_regular(path) as handle:
        if kind == "jsonl":
            yield from jsonl_blocks(handle, size)
        elif kind == "parquet":
            yield from parquet_blocks(handle, path, size)
        else:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)  # a file that grows while it is read is bounded too
            if len(data) > MAX_DOCUMENT_BYTES:
                raise UnreadableFile(
                    f"{path}: a JSON document over {MAX_DOCUMENT_BYTES >> 20} MiB is not read whole; send JSON Lines"
                )
            yield from _in_blocks(json_items(data, path), size)


def _in_blocks(items: Iterable[RawItem], size: int) -> Iterator[list[RawItem]]:
    block: list[RawItem] = []
    for item in items:
        block.append(item)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


@dataclass(slots=True)
class LineBlock:
    """Consecutive JSON Lines, not parsed yet: their numbers, bytes and how many identical
    lines came before each in the file (see ``RawItem.occurrence``). ``cut`` holds the numbers
    of lines longer than :data:`MAX_LINE_BYTES`, of which only the start was kept."""

    numbers: list[int] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    occurrences: list[int] = field(default_factory=list)
    cut: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[RawItem]:
        for number, line, copies in zip(self.numbers, self.lines, self.occurrences, strict=True):
            if number in self.cut:
                text = line.decode("utf-8", errors="replace") + "…"
                yield RawItem(UNPARSED, f"line {number}", text, f"the line is {self.cut[number]} bytes long, "
                              f"over the {MAX_LINE_BYTES >> 20} MiB a line may have; only its start is kept",
                              size=self.cut[number], occurrence=copies)
            else:
                yield RawItem.line(line, f"line {number}", copies)


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """Each line without its end, and its full length in bytes; a line longer than
    :data:`MAX_LINE_BYTES` comes back cut to :data:`KEPT_OF_A_CUT_LINE` bytes (the rest is read
    and dropped, never held)."""
    while line := handle.readline(MAX_LINE_BYTES + 1):
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line, len(line)
            continue
        length = len(line)
        while (more := handle.readline(MAX_LINE_BYTES)) and not more.endswith(b"\n"):
            length += len(more)
        yield line[:KEPT_OF_A_CUT_LINE], length + len(more)


def jsonl_blocks(handle: BinaryIO, size: int) -> Iterator[LineBlock]:
    # Lines are counted by their hash, not kept: a collision could only number a different
    # report's copy, whose id differs anyway (ids include the content digest).
    seen: Counter[int] = Counter()
    block = LineBlock()
    for number, (raw, length) in enumerate(_lines(handle), start=1):
        line = raw.strip()
        if not line:
            continue
        key = hash(line)
        copies = seen[key]
        seen[key] = copies + 1
        block.numbers.append(number)
        block.lines.append(line)
        block.occurrences.append(copies)
        if length > MAX_LINE_BYTES:
            block.cut[number] = length
        if len(block) == size:
            yield block
            block = LineBlock()
    if block.lines:
        yield block


def _with_occurrences(items: Iterable[RawItem]) -> Iterator[RawItem]:
    """Number identical parsed items (key order aside) in the order they came, by hash as for
    lines; an item that cannot be written as JSON (nested too deep) is quarantined anyway."""
    seen: Counter[int] = Counter()
    for item in items:
        try:
            key = hash(jsontext.dumps(item.obj, sort_keys=True))
        except (ValueError, TypeError):
            yield item
            continue
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


def parquet_blocks(handle: BinaryIO, path: Path, size: int) -> Iterator[list[RawItem]]:
    """The rows of the Parquet file open in ``handle``, one record batch at a time (null
    columns are absent fields)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(handle).iter_batches(batch_size=size)
        yield from _in_blocks(_with_occurrences(_numbered_rows(batches)), size)
    except pa.ArrowException as exc:
        raise UnreadableFile(f"{path}: not a readable Parquet file ({exc})") from exc


def _numbered_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[RawItem]:
    index = 0
    for batch in batches:
        for row in batch.to_pylist():
            yield RawItem({k: v for k, v in row.items() if v is not None}, f"row {index}")
            index += 1
