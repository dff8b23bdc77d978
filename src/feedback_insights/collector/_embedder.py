"""The collector's embedder: the pipeline's model, so a submission's vector is the one the
pipeline will compute for the same report, and a published centroid can be compared with it.

The model is loaded once per process, in the background, when the first known issue that
carries a meaning is loaded (most collectors' tests never load it). Encoding happens on worker
threads, one per usable core, off the event loop, one submission at a time and the newest
first. Not in batches: on the CPU a batch is padded to its longest text, and reports' lengths
vary (26 to 114 tokens in the sample), so one thread embedded 56 of the sample's reports a
second one at a time, 42 in batches of 8 and 26 in batches of 32. The newest first, because a
submission stops waiting after ``[collector] known_issue_wait``: under a flood, the newest
are the ones still waiting, and work on the others would be thrown away. The vectors of recently
seen texts are kept (a retry, an agent sending the same report twice, a vector that came too
late for its submission), keyed by the text's hash. A text is cut to :data:`MAX_TEXT`
characters first: the model reads 256 tokens, which a report reaches long before that, and a
hostile 64 KB body is not tokenized whole.

A collector whose model cannot be loaded (no ONNX Runtime, no writable cache for the export)
keeps working: it says so once in its log and matches by record id and key terms.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np

from ..clusters import embedder_for
from ..config import EmbeddingConfig
from ..drafts import vector_space

log = logging.getLogger("feedback_insights.collector")

#: Characters of a report's text that are embedded: far more than MiniLM's 256 tokens of any
#: report, far less than the 64 KB a hostile one may send.
MAX_TEXT = 8192
#: Vectors of recent texts kept (384 float32 each: 1.5 KB).
CACHE_SIZE = 4096

_Job = tuple[list[str], "Future[np.ndarray | None]"]


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def bounded(text: str) -> str:
    """The text as it is embedded: cut to :data:`MAX_TEXT`, any lone surrogate (JSON may carry
    one; the tokenizer refuses it) replaced."""
    return text[:MAX_TEXT].encode("utf-8", "replace").decode("utf-8")


class SubmissionEmbedder:
    """The packaged model on the collector's side (see the module's docstring)."""

    def __init__(self, settings: EmbeddingConfig = EmbeddingConfig()) -> None:
        self._model = embedder_for(settings)  # loads nothing until it first encodes
        self.space = vector_space(self._model.model_id)
        self._workers = max(1, min(4, getattr(self._model, "threads", 1)))  # ONNX: one per usable core
        self._jobs: deque[_Job] = deque()
        self._waiting = threading.Condition()
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._started = False
        self.failure: str | None = None

    def start(self) -> None:
        """Load the model in the background, once; the workers start when it is loaded."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="collector-embedder-load", daemon=True).start()

    async def ready(self) -> bool:
        """Wait for the model (starting it); whether it loaded."""
        self.start()
        await asyncio.to_thread(self._ready.wait)
        return self.failure is None

    async def vectors(self, texts: Sequence[str], wait: float) -> list[np.ndarray] | None:
        """Unit vectors of ``texts``, or None when the model is unavailable or they are not
        ready within ``wait`` seconds (the workers are that far behind): the caller matches
        without them, and what it gave up waiting for is not encoded (or, when a worker had
        already started on it, kept for next time)."""
        if self.failure is not None:
            return None
        texts = [bounded(t) for t in texts]
        keys = [_key(t) for t in texts]
        with self._lock:
            found = [self._cached(k) for k in keys]
        missing = [i for i, vector in enumerate(found) if vector is None]
        if missing:
            self.start()
            future: Future[np.ndarray | None] = Future()
            # Kept when they come, even too late for this submission: its retry will find them.
            future.add_done_callback(lambda done: self._remember([keys[i] for i in missing], done))
            with self._waiting:
                self._jobs.append(([texts[i] for i in missing], future))
                self._waiting.notify()
            try:
                fresh = await asyncio.wait_for(asyncio.wrap_future(future), wait)
            except TimeoutError:
                return None
            if fresh is None:
                return None
            for i, vector in zip(missing, fresh, strict=True):
                found[i] = vector
        return [vector for vector in found if vector is not None]

    def _cached(self, key: bytes) -> np.ndarray | None:
        vector = self._cache.get(key)
        if vector is not None:
            self._cache.move_to_end(key)
        return vector

    def _remember(self, keys: list[bytes], done: Future[np.ndarray | None]) -> None:
        vectors = None if done.cancelled() else done.result()
        if vectors is None:
            return
        with self._lock:
            for key, vector in zip(keys, vectors, strict=True):
                self._cache[key] = vector
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)

    def _load(self) -> None:
        try:
            self._model.encode(["known issues"])  # loads (exports on first use) the model
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime, the exporter, the file system: any
            self.failure = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("known issues are matched by record id and key terms only: the embedding model "
                        "could not be loaded (%s)", self.failure)
        self._ready.set()
        with self._waiting:
            if self._closing:
                return
            for n in range(self._workers if self.failure is None else 1):
                thread = threading.Thread(target=self._work, name=f"collector-embedder-{n}", daemon=True)
                thread.start()
                self._threads.append(thread)
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the workers (each after the submission it is encoding): a process that exits
        while ONNX Runtime is still running on a thread of its own aborts."""
        with self._waiting:
            self._closing = True
            self._waiting.notify_all()
        for thread in self._threads:
            thread.join(timeout=10)

    def _work(self) -> None:
        while (job := self._take()) is not None:
            texts, future = job
            vectors: np.ndarray | None = None
            if self.failure is None:  # else whoever queued before it was known is answered without
                try:
                    vectors = self._model.encode(texts)
                except Exception:  # noqa: BLE001 - one bad submission must not stop the worker
                    log.exception("embedding a submission failed; it is matched without vectors")
            future.set_result(vectors)

    def _take(self) -> _Job | None:
        """The newest job whose submission is still waiting; None once closing."""
        with self._waiting:
            while True:
                while not self._jobs and not self._closing:
                    self._waiting.wait()
                if self._closing:
                    return None
                job = self._jobs.pop()
                if job[1].set_running_or_notify_cancel():
                    return job
