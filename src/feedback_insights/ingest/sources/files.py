"""A file drop: a folder of JSON Lines, JSON and Parquet files, each ingested once.

A file is known by the sha256 of its content, so a renamed copy is not ingested again and an
edited file is a new file. Its cursor key ``file:<sha256>`` holds how many items are stored
(``done`` when all are), so a big file that was interrupted resumes where it stopped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from ...config import DEFAULT_BATCH_SIZE, FileDropConfig
from .._readers import read_blocks
from ._batch import Batch

DONE = "done"


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
            key = f"file:{file_digest(path)}"
            progress = cursors.get(key)
            if progress == DONE:
                continue
            yield from self._file_batches(path, key, int(progress or 0))

    def _file_batches(self, path: Path, key: str, skip: int) -> Iterator[Batch]:
        """One batch per block; a resumed file skips the blocks already stored (their size is
        the configured batch size, so block boundaries are where the cursor can point)."""
        done = 0
        for block in read_blocks(path, self.batch_size):
            done += len(block)
            if done > skip:
                yield Batch(block, str(path), {key: str(done)})
        yield Batch([], str(path), {key: DONE})
