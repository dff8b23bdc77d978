"""A file drop: a folder of JSON Lines, JSON and Parquet files, each ingested once.

A file is known by the sha256 of its content, so a renamed copy is not ingested again and an
edited file is a new file. Its cursor key ``file:<sha256>`` holds how many items are stored
(``done`` when all are), so a big file that was interrupted resumes where it stopped.

A file that cannot be read (a truncated Parquet file, a broken JSON document, an I/O error)
never blocks the rest of the drop: it becomes one quarantine entry at position
:data:`WHOLE_FILE` naming the file and the reason, and ``quarantine replay`` reads it again
once it is fixed or replaced.

**What is read.** Only regular files inside the drop. A symbolic link is followed only when
it leads to a file inside the drop (read as that file, named by its own path there); one that
leads out of it (``env.jsonl -> /proc/self/environ``) is refused, as is a device, a FIFO or a
socket (:func:`~feedback_insights.ingest._readers.open_regular`): each is a quarantine entry
naming the file and why, holding nothing of its content, tried again on every run. A file's
name is the sender's text like any other: the part under the drop is scrubbed before it is
stored as ``source_uri`` (a drop file named like a token or an email address is stored as
``[REDACTED:email:1]``; such an entry's ``quarantine replay`` then finds no file to read again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ...config import DEFAULT_BATCH_SIZE, FileDropConfig
from ...privacy import scrub_text
from .._raw import UNPARSED, RawItem
from .._readers import UnreadableFile, open_regular, read_blocks
from ._batch import Batch

DONE = "done"
#: The quarantine position of a file that could not be read as a whole.
WHOLE_FILE = "file"


def file_digest(path: Path) -> str:
    with open_regular(path) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class LinkOutOfTheDrop(UnreadableFile):
    """A drop file that is a symbolic link to somewhere outside the drop."""


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

    def files(self) -> dict[Path, Path | LinkOutOfTheDrop]:
        """Each file of the drop, under the name it is stored by (scrubbed), → the real path to
        read, or why it is not read. A configured single file is the configuration's to name."""
        if self.root.is_file():
            return {self.root: self.root.resolve()}
        if not self.root.is_dir():
            raise FileNotFoundError(f"source {self.name!r}: {self.root} does not exist")
        inside = self.root.resolve()
        found: dict[Path, Path | LinkOutOfTheDrop] = {}
        for path in sorted({p for pattern in self.patterns for p in self.root.glob(pattern) if not p.is_dir()}):
            real = path.resolve()
            if real.is_relative_to(inside):
                found.setdefault(self.root / scrub_text(str(real.relative_to(inside)))[0], real)
            else:
                named = self.root / scrub_text(str(path.relative_to(self.root)))[0]
                found[named] = LinkOutOfTheDrop(f"{named}: is a symbolic link out of the drop, not followed")
        return found

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        for named, real in self.files().items():
            try:
                if isinstance(real, LinkOutOfTheDrop):
                    raise real
                key = f"file:{file_digest(real)}"
            except (OSError, UnreadableFile) as exc:  # no digest, so no cursor: tried again (one entry) each run
                yield unreadable(named, exc, {})
                continue
            progress = cursors.get(key)
            if progress == DONE:
                continue
            try:
                yield from self._file_batches(named, real, key, int(progress or 0))
            except (OSError, UnreadableFile) as exc:
                yield unreadable(named, exc, {key: DONE})

    def _file_batches(self, named: Path, real: Path, key: str, skip: int) -> Iterator[Batch]:
        """One batch per block; a resumed file skips the blocks already stored (their size is
        the configured batch size, so block boundaries are where the cursor can point)."""
        done, when = 0, received_at(self.config, real)
        for block in read_blocks(real, self.batch_size):
            done += len(block)
            if done > skip:
                yield Batch(block, str(named), {key: str(done)}, received_at=when)
        yield Batch([], str(named), {key: DONE})


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
    """The quarantine entry for a file that could not be read, naming it (``path``: the name it
    is stored by) and why, with nothing of its content."""
    reason = str(error) if isinstance(error, UnreadableFile) else f"{path}: {error.strerror or error}"
    item = RawItem(UNPARSED, WHOLE_FILE, "", f"the file cannot be read: {reason}")
    return Batch([item], str(path), cursor)
