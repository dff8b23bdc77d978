"""LLM-assisted clustering, optional: what is asked of the model, and what counts as an answer.

Three uses, each chosen in ``[llm] clustering`` (none by default):

- ``statements``: a one-sentence, abstract problem statement per report (the facet idea of
  Anthropic's Clio), embedded in front of the report's text, so that two people who describe one
  problem in different words land closer than their words alone would put them;
- ``names``: a cluster's label as "tool or endpoint: symptom", at most 80 characters;
- ``merges``: two clusters of one partition whose centroids fall in the grey band
  (:data:`GREY_BAND`) are put to the model as "the same underlying problem?"; a yes merges them
  as a recorded, undoable correction (:mod:`._assist_store`).

Every prompt is a Jinja2 template in ``templates/`` with report text inside
``<untrusted_report>`` delimiters it cannot close (autoescaped: ``<``, ``>``, ``&`` become
entities), and what is said of a cluster (its service, its size) inside ``<untrusted_cluster>``,
under a system prompt of our own text alone that says their content is data. Answers are asked for in a
JSON schema (``schemas/cluster_*.schema.json``) and validated here: an endpoint need not enforce
it. The first endpoint failure (after the client's retries; a hanging endpoint is a timeout)
ends the model's part of the run: the rest is embedding-only, and :meth:`Assistant.line` says so.
An answer refused or cut off is that one prompt's invalid answer: one hostile report that the
model refuses to read does not end the model's help for the others.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import jinja2
import numpy as np
import orjson

from ..core import shared_schemas
from ..llm import ChatClient, LLMError, UnusableAnswer
from ._algorithm import unit

if TYPE_CHECKING:
    import polars as pl
    from duckdb import DuckDBPyConnection

    from ..warehouse import Warehouse

USES = ("statements", "names", "merges")

#: Cosine between two clusters' centroids (on vectors centred on the view's mean, as the
#: algorithm merges fragments) for which the model is asked whether they are one problem: around
#: the algorithm's own ``merge_similarity`` (0.5; pairs above it remain where two runs cut them
#: apart or average linkage kept them so). Chosen with ``benchmarks/cluster_llm.py --oracle`` (the
#: gold labels as judge; re-measured 2026-12-02 on clustering version 3): this band holds the most
#: true pairs per call on clinc150 and hwu64 (13 % and 48 % of the pairs asked; 0.3–0.4: 7 % and
#: 38 %, hwu64's broad intents making even distant clusters one "problem") and merges nothing on
#: bug_duplicates.
GREY_BAND = (0.4, 0.7)
#: Pairs put to the model per partition and run, closest first: a bound on the cost (all of
#: clinc150's 146 pairs in the band fit; 50 would leave most of its true pairs unasked).
MAX_PAIRS = 200
#: New names asked for per run, the largest clusters first: a bound on the cost of a first run over
#: a big backlog (the rest keep their phrase label and are named by the next runs).
MAX_NAMES = 300
#: Reports shown per cluster when naming or judging (the most typical: nearest the centroid).
SHOWN_REPORTS = 6
#: Longest report text put in a prompt, in characters.
TEXT_CHARS = 1200
#: Calls in flight at once for statements (one per report; names and judgements go one by one).
CONCURRENCY = 4

_TEMPLATES = Path(__file__).with_name("templates")
_SCHEMAS = {"statement": "cluster_statement.schema.json", "name": "cluster_name.schema.json",
            "judge": "cluster_judgement.schema.json"}
#: What a statement may not contain although the schema allows it: it must stay abstract.
_IDENTIFIER = re.compile(r"https?://|www\.|@\w|\d{3,}|`|\n")
_SPACE = re.compile(r"\s+")


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,  # every value: & < > " ' become entities, so no report closes its delimiter
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    # A name (the service) is one short line: it cannot start a line that reads like the rules.
    env.filters["one_line"] = lambda text: clip(_SPACE.sub(" ", str(text)).strip(), 200)
    return env


@cache
def prompt_version(purpose: str) -> str:
    """A hash of the purpose's templates: editing a prompt makes every cached answer stale."""
    sources = [(_TEMPLATES / name).read_bytes() for name in ("_rules.j2", f"{purpose}_system.j2", f"{purpose}_user.j2")]
    return hashlib.sha256(b"\0".join(sources)).hexdigest()[:12]


def messages(purpose: str, **context: Any) -> list[dict[str, str]]:
    """The system and user messages of ``purpose`` (statement | name | judge)."""
    env = _env()
    return [{"role": "system", "content": env.get_template(f"{purpose}_system.j2").render(**context)},
            {"role": "user", "content": env.get_template(f"{purpose}_user.j2").render(**context)}]


def _wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as sent: only the keywords every structured-output endpoint takes (lengths and
    patterns are checked here instead)."""
    keep = {"type", "properties", "required", "additionalProperties", "items", "enum"}
    out = {k: v for k, v in schema.items() if k in keep}
    if "properties" in out:
        out["properties"] = {name: _wire_schema(sub) for name, sub in out["properties"].items()}
    return out


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def clip(text: str, limit: int = TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def parse(purpose: str, text: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(answer, None)`` or ``(None, what is wrong with it)``; strings come back with their
    whitespace collapsed."""
    try:
        answer = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return None, f"not JSON: {exc}"
    problems = shared_schemas().check(_SCHEMAS[purpose], answer)
    if problems:
        return None, "; ".join(map(str, problems[:3]))
    if purpose == "statement" and _IDENTIFIER.search(answer["statement"]):
        return None, "the statement names identifiers (a URL, a handle, a number, code)"
    for key, value in answer.items():
        if isinstance(value, str):
            answer[key] = _SPACE.sub(" ", value).strip()
    if purpose == "name":
        answer["name"] = answer["name"].rstrip(" .")
    return answer, None


@dataclass(frozen=True, slots=True)
class Call:
    """One call, as ``cluster_llm_calls`` keeps it: hashes, never the text."""

    purpose: str
    prompt_version: str
    prompt_sha256: str
    response_sha256: str | None
    outcome: str  # ok | invalid | error
    error: str | None
    seconds: float
    cluster_id: int | None = None
    other_id: int | None = None


@dataclass(frozen=True, slots=True)
class Judgement:
    same: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the model is shown of one cluster: its size and its most typical reports' text."""

    size: int
    texts: list[str]


class Assistant:
    """One run's use of the model for clustering: the client, which uses are on, every call made,
    and the failure that ended the model's part of the run (None while the endpoint answers)."""

    def __init__(self, client: ChatClient, uses: Collection[str] = USES) -> None:
        unknown = set(uses) - set(USES)
        if unknown:
            raise ValueError(f"unknown LLM clustering uses: {', '.join(sorted(unknown))}")
        self.client = client
        self.uses = frozenset(uses)
        self.calls: list[Call] = []
        self.counts: Counter[str] = Counter()
        self.failure: str | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.client.config.model

    @property
    def actor(self) -> str:
        """Who the corrections it makes are recorded as."""
        return f"llm:{self.model}"

    def note(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    def ask(self, purpose: str, context: dict[str, Any], cluster_id: int | None = None,
            other_id: int | None = None) -> dict[str, Any] | None:
        """The model's valid answer, or None (invalid, failed, or the endpoint already failed)."""
        if self.failure:
            return None
        prompt = messages(purpose, **context)
        schema = _wire_schema(shared_schemas().raw(_SCHEMAS[purpose]))
        start = time.perf_counter()
        version, prompt_hash = prompt_version(purpose), sha256(orjson.dumps(prompt))
        try:
            text = self.client.complete(prompt, (f"cluster_{purpose}", schema))
        except UnusableAnswer as exc:  # this prompt's answer (a report the model refuses), not the endpoint
            self._log(Call(purpose, version, prompt_hash, None, "invalid", str(exc), time.perf_counter() - start,
                           cluster_id, other_id))
            return None
        except LLMError as exc:
            with self._lock:
                self.failure = self.failure or str(exc)
            self._log(Call(purpose, version, prompt_hash, None, "error", str(exc), time.perf_counter() - start,
                           cluster_id, other_id))
            return None
        answer, problem = parse(purpose, text)
        self._log(Call(purpose, version, prompt_hash, sha256(text), "ok" if answer else "invalid", problem,
                       time.perf_counter() - start, cluster_id, other_id))
        return answer

    def _log(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)
            self.counts[f"{call.purpose} {call.outcome}"] += 1

    def statements(self, texts: Sequence[str]) -> list[str | None]:
        """A problem statement per text (None where the model gave none): the first alone, which
        finds out whether the endpoint answers at all, then :data:`CONCURRENCY` at a time."""
        def one(text: str) -> str | None:
            answer = self.ask("statement", {"text": clip(text)})
            return answer["statement"] if answer else None

        if not texts:
            return []
        first = one(texts[0])
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            return [first, *pool.map(one, texts[1:])]

    def name(self, service: str | None, evidence: Evidence, cluster_id: int | None = None) -> str | None:
        answer = self.ask("name", {"service": service or "the product", "size": evidence.size,
                                   "texts": [clip(t) for t in evidence.texts]}, cluster_id)
        return answer["name"] if answer else None

    def judge(self, service: str | None, a: Evidence, b: Evidence, ids: tuple[int | None, int | None] = (None, None)) -> Judgement | None:
        answer = self.ask("judge", {"service": service or "the product", "a": _shown(a), "b": _shown(b)}, *ids)
        return Judgement(answer["same"], answer["reason"]) if answer else None

    def line(self) -> str:
        """What the model did this run, for the run summary; says so when it stopped helping."""
        done = ", ".join(f"{n} {what}" for what, n in sorted(self.counts.items())) or "nothing asked"
        if self.failure:
            return f"LLM ({self.model}): {done}; the endpoint failed ({self.failure}): the rest is embedding-only"
        return f"LLM ({self.model}): {done}"


def _shown(evidence: Evidence) -> dict[str, Any]:
    return {"size": evidence.size, "texts": [clip(t) for t in evidence.texts]}


def embedded_text(statement: str | None, text: str) -> str:
    """What is embedded for a report: its problem statement first (a long report's tail is what
    the model's 256-token window cuts), then its text; the text alone without a statement. The
    two differ, so their vectors are cached under different keys and never mix."""
    return f"{statement}\n{text}" if statement else text


def typical(vectors: np.ndarray, shown: int = SHOWN_REPORTS) -> np.ndarray:
    """Row indices of the ``shown`` rows nearest the centroid, nearest first."""
    centroid = vectors.mean(axis=0)
    return np.argsort(-(vectors @ centroid), kind="stable")[:shown]


def borderline_pairs(centroids: np.ndarray, band: tuple[float, float] = GREY_BAND,
                     limit: int = MAX_PAIRS) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, cosine)`` of rows of ``centroids`` (one partition's clusters) whose cosine is
    in ``band``, closest first, at most ``limit``."""
    if len(centroids) < 2:
        return []
    unit = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    i, j = np.triu_indices(len(unit), k=1)
    s = sims[i, j]
    keep = (s >= band[0]) & (s < band[1])
    order = np.argsort(-s[keep], kind="stable")[:limit]
    return [(int(a), int(b), float(c)) for a, b, c in zip(i[keep][order], j[keep][order], s[keep][order], strict=True)]


def cluster_centroids(vectors: np.ndarray, labels: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cluster ids of ``labels`` (-1 = none) and their centroids on vectors centred on
    ``centre``, the space the algorithm merges fragments in."""
    centred = unit(unit(vectors.astype(np.float32)) - centre)
    clustered = labels >= 0
    ids = np.unique(labels[clustered])
    sums = np.zeros((len(ids), vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, np.searchsorted(ids, labels[clustered]), centred[clustered])
    return ids, unit(sums)


class StageAssist(Protocol):
    """What the clustering stage asks of the optional LLM help (``_assist_store.py``): the texts to
    embed for a view's pending reports, and the work on the clusters a run touched."""

    def texts(self, con: DuckDBPyConnection, pending: pl.DataFrame, view: str) -> list[str]: ...

    def after_view(self, warehouse: Warehouse, model: str, view: str, touched: set[int]) -> None: ...

