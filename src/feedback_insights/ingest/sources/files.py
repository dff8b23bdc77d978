"""A file drop: a folder of JSON Lines, JSON and Parquet files, each ingested once.

A file is known by the sha256 of its content, so a renamed copy is not ingested again and an
edited file is a new file. Its cursor key ``file:<sha256>`` holds how many items are stored
(``done`` when all are), so a big file that was interrupted resumes where it stopped.

A file that cannot be read (a truncated Parquet file, a broken JSON document, an I/O error)
never blocks the rest of the drop: it becomes one quarantine entry at position
:data:`WHOLE_FILE` naming the file and the reason, and ``quarantine replay`` reads it again
once it is fixed or replaced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ...config import DEFAULT_BATCH_SIZE, FileDropConfig
from .._raw import UNPARSED, RawItem
from .._readers import UnreadableFile, read_blocks
from ._batch import Batch

DONE = "done"
#: The quarantine position of a file that could not be read as a whole.
WHOLE_FILE = "file"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class FileDrop:
    kind = "files"
    config_model = FileDropConfig

    def __init__(self, config: FileDropConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.config = config
        self.name = config.name
        self.dialect = config.dialect
        self.service = config.service
        self.prevalidated = False
        self.root = config.path
        self.patterns = config.patterns
        self.batch_size = batch_size

    def files(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        if not self.root.is_dir():
            raise FileNotFoundError(f"source {self.name!r}: {self.root} does not exist")
        found = {p for pattern in self.patterns for p in self.root.glob(pattern) if p.is_file()}
        return sorted(found)

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        for path in self.files():
            try:
                key = f"file:{file_digest(path)}"
            except OSError as exc:  # no digest, so no cursor: tried again (one entry) each run
                yield unreadable(path, exc, {})
                continue
            progress = cursors.get(key)
            if progress == DONE:
                continue
            try:
                yield from self._file_batches(path, key, int(progress or 0))
            except (OSError, UnreadableFile) as exc:
                yield unreadable(path, exc, {key: DONE})

    def _file_batches(self, path: Path, key: str, skip: int) -> Iterator[Batch]:
        """One batch per block; a resumed file skips the blocks already stored (their size is
        the configured batch size, so block boundaries are where the cursor can point)."""
        done, when = 0, received_at(self.config, path)
        for block in read_blocks(path, self.batch_size):
            done += len(block)
            if done > skip:
                yield Batch(block, str(path), {key: str(done)}, received_at=when)
        yield Batch([], str(path), {key: DONE})


def received_at(config: FileDropConfig, path: Path) -> str | None:
    """When the reports of ``path`` that carry no time of their own were received, by the
    source's ``received_at`` rule (None: when the run reads them). The file's modification
    time is when it was delivered, whenever a run gets to it and on every re-ingest alike."""
    if config.received_at == "ingest":
        return None
    if config.received_at == "file":
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()
    return config.received_at.isoformat()


def unreadable(path: Path, error: OSError | UnreadableFile, cursor: dict[str, str]) -> Batch:
    """The quarantine entry for a file that could not be read, naming it and why."""
    reason = str(error) if isinstance(error, UnreadableFile) else f"{path}: {error.strerror or error}"
    item = RawItem(UNPARSED, WHOLE_FILE, "", f"the file cannot be read: {reason}")
    return Batch([item], str(path), cursor)
