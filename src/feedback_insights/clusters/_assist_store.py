"""LLM-assisted clustering in the warehouse: cached statements, names, borderline merges, and the
log of every call (``cluster_llm_calls``, by hash only, as ``llm_calls`` keeps drafting's).

- Statements are cached in ``problem_statements`` by (model, prompt version, sha256 of the
  report's text): a second run asks nothing for a text it has seen.
- Names are kept in ``cluster_names`` with a hash of the reports the prompt showed: a cluster
  whose most typical reports are unchanged keeps its name without a call. A cluster's label
  came from the LLM when it equals its ``cluster_names`` name.
- A borderline pair the model calls one problem is merged with :func:`merge` as actor
  ``llm:<model>`` with the model's reason; ``cluster_judgements`` keeps every answer (a pair
  with the same evidence is never asked twice) and, for a merge, the absorbed members, which
  :func:`undo_merge` splits back out. A cluster a maintainer merged or split is never judged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
from duckdb import DuckDBPyConnection

from ..config import LLMConfig
from ..core import now_utc
from ..llm import ChatClient
from ..warehouse import Warehouse, registered, transaction
from ._algorithm import background
from ._assist import (
    GREY_BAND,
    MAX_NAMES,
    Assistant,
    Evidence,
    borderline_pairs,
    cluster_centroids,
    embedded_text,
    prompt_version,
    sha256,
    typical,
)
from ._corrections import CorrectionError, merge, split
from ._embedding import text_sha256, text_sql, to_matrix
from ._stage import _MAIN_TOOL
from ._titles import acceptable

#: How a yes is carried out: ``(warehouse, into, other, actor, reason)``. The default is the
#: clusters' own :func:`merge`; the pipeline passes the drafts layer's, so that the absorbed
#: cluster's draft is superseded or taken over at once, as after a maintainer's merge.
Merge = Callable[[Warehouse, int, int, str, str], object]

#: Every member of the view's live clusters with its vector and its text; ``curated`` when a
#: maintainer (not the model) merged, split or moved into its cluster.
_MEMBERS = """
SELECT m.cluster_id, c.service, c.polarity, c.status, m.collector, m.id, e.vector, {text} AS text,
       EXISTS (SELECT 1 FROM cluster_actions a
               WHERE a.action IN ('merge', 'split', 'move', 'undo') AND c.id IN (a.cluster_id, a.other_id)
                 AND a.actor NOT LIKE 'llm:%') AS curated
FROM cluster_members m
JOIN clusters c ON c.id = m.cluster_id
JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
JOIN records r ON r.collector = m.collector AND r.id = m.id
WHERE m.view = $view AND c.status <> 'merged'
ORDER BY m.cluster_id, m.collector, m.id
"""


@dataclass(slots=True)
class _Clusters:
    """One view's live clusters, member by member (rows sorted by cluster)."""

    frame: pl.DataFrame
    vectors: np.ndarray
    rows: dict[int, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        groups = self.frame.with_row_index("row").group_by("cluster_id").agg("row")
        self.rows = {int(c): np.asarray(r, dtype=np.int64) for c, r in groups.iter_rows()}

    def evidence(self, cluster_id: int) -> Evidence:
        rows = self.rows[cluster_id]
        texts = self.frame.get_column("text")
        return Evidence(len(rows), [texts[int(rows[i])] for i in typical(self.vectors[rows])])


class ClusterAssist:
    """The stage's LLM help (:class:`StageAssist`) over one warehouse, for one run."""

    def __init__(self, assistant: Assistant, band: tuple[float, float] = GREY_BAND, merge: Merge = merge,
                 max_names: int = MAX_NAMES) -> None:
        self.assistant = assistant
        self.band = band
        self.merge = merge
        self.max_names = max_names
        self._flushed = 0

    def line(self) -> str:
        return self.assistant.line()

    # -- statements --------------------------------------------------------------------------

    def texts(self, con: DuckDBPyConnection, pending: pl.DataFrame, view: str) -> list[str]:
        """The texts to embed for ``pending`` (rows with a text): a problem report's statement
        and text when there is a statement, else its text."""
        texts = pending.get_column("text").to_list()
        if view != "reports" or "statements" not in self.assistant.uses:
            return texts
        problem = pending.get_column("polarity").to_numpy() == "problem"
        statements = self._statements(con, [t for t, p in zip(texts, problem, strict=True) if p])
        out = [embedded_text(statements.get(text_sha256(t)), t) if p else t for t, p in zip(texts, problem, strict=True)]
        self._flush(con)
        return out

    def _statements(self, con: DuckDBPyConnection, texts: list[str]) -> dict[str, str]:
        """Statements by text hash: cached ones, then the model's for the rest."""
        by_hash = {text_sha256(t): t for t in texts}
        model, version = self.assistant.model, prompt_version("statement")
        known = dict(con.execute(
            """SELECT text_sha256, statement FROM problem_statements
               WHERE model = ? AND prompt_version = ? AND text_sha256 IN (SELECT unnest(?))""",
            [model, version, list(by_hash)],
        ).fetchall())
        self.assistant.note("statements cached", len(known))
        todo = [h for h in by_hash if h not in known]
        made = self.assistant.statements([by_hash[h] for h in todo])
        fresh = {h: s for h, s in zip(todo, made, strict=True) if s is not None}
        if fresh:
            now = now_utc()
            rows = pa.table({
                "sha": list(fresh), "statement": list(fresh.values()),
                "embedded": [text_sha256(embedded_text(s, by_hash[h])) for h, s in fresh.items()],
            })
            with registered(con, "fresh_statements", rows):
                con.execute(
                    """INSERT OR REPLACE INTO problem_statements
                       SELECT ?, ?, sha, statement, embedded, ? FROM fresh_statements""",
                    [model, version, now],
                )
        return known | fresh

    # -- after a view's run: merges, then names ------------------------------------------------

    def after_view(self, warehouse: Warehouse, model: str, view: str, touched: set[int]) -> None:
        """Judge the borderline pairs among the clusters this run touched, then name what needs it."""
        if view != "reports":
            return  # goal themes are what agents wanted, not problems to merge or name as such
        touched = set(touched)
        if "merges" in self.assistant.uses and touched:
            touched = self._merges(warehouse, model, view, touched)
        if "names" in self.assistant.uses:
            self._names(warehouse, model, view, touched)
        self._flush(warehouse.con)

    def _clusters(self, con: DuckDBPyConnection, model: str, view: str) -> _Clusters:
        table = con.sql(_MEMBERS.format(text=text_sql(view)), params={"model": model, "view": view}).to_arrow_table()
        frame = pl.from_arrow(table.drop(["vector"]))
        assert isinstance(frame, pl.DataFrame)
        return _Clusters(frame, to_matrix(table.column("vector")) if table.num_rows else np.empty((0, 0), np.float32))

    def _merges(self, warehouse: Warehouse, model: str, view: str, touched: set[int]) -> set[int]:
        """Put each partition's borderline pairs that involve a touched cluster to the model;
        merge on a yes. Returns ``touched`` with the absorbed clusters replaced by their survivors."""
        clusters = self._clusters(warehouse.con, model, view)
        if clusters.frame.is_empty():
            return touched
        frame = clusters.frame.with_row_index("row")
        centre = background(clusters.vectors)
        gone: set[int] = set()
        for (service, _), part in frame.filter(pl.col("status") == "open").group_by(
                "service", "polarity", maintain_order=True):
            rows = part.get_column("row").to_numpy()
            labels = part.get_column("cluster_id").to_numpy().astype(np.int64)
            curated = set(part.filter(pl.col("curated")).get_column("cluster_id").to_list())
            ids, centroids = cluster_centroids(clusters.vectors[rows], labels, centre)
            sizes = dict(zip(*np.unique(labels, return_counts=True), strict=True))
            for i, j, similarity in borderline_pairs(centroids, self.band):
                a, b = int(ids[i]), int(ids[j])
                if not ({a, b} & touched) or {a, b} & (gone | curated):
                    continue
                into, other = (a, b) if (sizes[a], -a) >= (sizes[b], -b) else (b, a)
                if self._judge(warehouse, clusters, service, into, other, similarity):
                    gone.add(other)
                    touched = (touched - {other}) | {into}
        return touched

    def _judge(self, warehouse: Warehouse, clusters: _Clusters, service: str | None, into: int, other: int,
               similarity: float) -> bool:
        """Whether ``other`` was merged into ``into`` on the model's word (cached per evidence)."""
        con, model, version = warehouse.con, self.assistant.model, prompt_version("judge")
        a, b = clusters.evidence(into), clusters.evidence(other)
        evidence = sha256(orjson.dumps([a.texts, b.texts]))
        cached = con.execute(
            "SELECT same FROM cluster_judgements WHERE model = ? AND prompt_version = ? AND evidence_sha256 = ?",
            [model, version, evidence],
        ).fetchall()
        if cached:
            self.assistant.note("pairs judged before")
            return False  # a yes was merged when it was given; a no stands while the evidence does
        judgement = self.assistant.judge(service, a, b, (into, other))
        if judgement is None:
            return False
        records = None
        if judgement.same:
            records = [f"{c}:{i}" for c, i in con.execute(
                "SELECT collector, id FROM cluster_members WHERE cluster_id = ? ORDER BY collector, id", [other]
            ).fetchall()]
            reason = (f"{judgement.reason} (the model judged them one problem at centroid cosine {similarity:.2f}; "
                      f"undo: split the {len(records)} reports of cluster {other} back out of {into})")
            try:
                self.merge(warehouse, into, other, self.assistant.actor, reason)
                self.assistant.note("clusters merged")
            except CorrectionError:  # e.g. both issues filed the wrong way round: a maintainer's call
                records = None
                self.assistant.note("merges refused")
        con.execute(
            "INSERT OR REPLACE INTO cluster_judgements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [model, version, evidence, into, other, similarity, judgement.same, judgement.reason,
             orjson.dumps(records).decode() if records else None, now_utc()],
        )
        return judgement.same and records is not None

    def _names(self, warehouse: Warehouse, model: str, view: str, touched: set[int]) -> None:
        """Name the touched clusters and any whose label is not (or no longer) its LLM name, the
        largest first; at most ``max_names`` new names a run. A name is used only when it passes
        the checks ours pass (:func:`~._titles.acceptable`: it names the cluster's tool)."""
        con = warehouse.con
        unnamed = {row[0] for row in con.execute(
            """SELECT c.id FROM clusters c LEFT JOIN cluster_names n ON n.cluster_id = c.id
               WHERE c.view = ? AND c.status <> 'merged' AND c.given_name IS NULL AND c.label IS DISTINCT FROM n.name""", [view]
        ).fetchall()}
        wanted = touched | unnamed
        if not wanted:
            return
        clusters = self._clusters(con, model, view)
        services = dict(clusters.frame.select("cluster_id", "service").unique("cluster_id").iter_rows())
        version = prompt_version("name")
        kept = {row[0]: row[1:] for row in con.execute(
            "SELECT cluster_id, evidence_sha256, name FROM cluster_names WHERE model = ? AND prompt_version = ?",
            [self.assistant.model, version]).fetchall()}
        sizes = dict(clusters.frame.group_by("cluster_id").len().iter_rows())
        things = dict(con.execute(_MAIN_TOOL, {"view": view, "ids": sorted(wanted)}).fetchall())
        names: dict[int, str] = {}
        asked = 0
        for cluster_id in sorted(wanted & set(services), key=lambda c: (-sizes[c], c)):
            evidence = clusters.evidence(cluster_id)
            shown = sha256(orjson.dumps(evidence.texts))
            cached = kept.get(cluster_id, (None, None))[0] == shown
            if not cached and asked == self.max_names:
                self.assistant.note("names left for the next run")
                continue
            asked += not cached
            name = kept[cluster_id][1] if cached else self.assistant.name(services[cluster_id], evidence, cluster_id)
            if name is None:
                # No name now: the one kept (if any) no longer describes the cluster.
                con.execute("DELETE FROM cluster_names WHERE cluster_id = ?", [cluster_id])
                continue
            if not cached:
                con.execute("INSERT OR REPLACE INTO cluster_names VALUES (?, ?, ?, ?, ?, ?)",
                            [cluster_id, name, self.assistant.model, version, shown, now_utc()])
            if acceptable(name, things.get(cluster_id)):
                names[cluster_id] = name
            else:  # kept (not asked again for the same reports), not used: ours passes the checks
                self.assistant.note("names that failed our checks")
        if names:
            with transaction(con), registered(con, "llm_names", pa.table({"id": list(names), "name": list(names.values())})):
                con.execute("UPDATE clusters c SET label = n.name FROM llm_names n WHERE c.id = n.id AND c.given_name IS NULL")
        self.assistant.note("clusters named", len(names))

    def _flush(self, con: DuckDBPyConnection) -> None:
        """Log the calls made since the last flush."""
        calls = self.assistant.calls[self._flushed:]
        if not calls:
            return
        now = now_utc()
        con.executemany(
            "INSERT INTO cluster_llm_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [[c.purpose, c.cluster_id, c.other_id, self.assistant.model, c.prompt_version, c.prompt_sha256,
              c.response_sha256, c.outcome, c.error, c.seconds, now] for c in calls],
        )
        self._flushed += len(calls)


@contextmanager
def cluster_assist(config: LLMConfig | None, backoff: float = 1.0, merge: Merge = merge) -> Iterator[ClusterAssist | None]:
    """The LLM help ``[llm] clustering`` asks for, or None (the default: embedding-only)."""
    if config is None or not config.clustering:
        yield None
        return
    with ChatClient(config, backoff=backoff) as client:
        yield ClusterAssist(Assistant(client, config.clustering), merge=merge)


def undo_merge(warehouse: Warehouse, absorbed: int, actor: str) -> int:
    """Take back the model's merge of cluster ``absorbed``: its reports (those still in the
    survivor) are split back out into a new cluster, which is never judged again. Returns its id."""
    found = warehouse.con.execute(
        """SELECT j.cluster_id, j.records, c.merged_into FROM cluster_judgements j JOIN clusters c ON c.id = j.other_id
           WHERE j.other_id = ? AND j.same AND j.records IS NOT NULL ORDER BY j.judged_at DESC LIMIT 1""", [absorbed]
    ).fetchall()
    if not found:
        raise CorrectionError(f"cluster {absorbed} was not merged by an LLM")
    _, records, survivor = found[0]
    members = {f"{c}:{i}" for c, i in warehouse.con.execute(
        "SELECT collector, id FROM cluster_members WHERE cluster_id = ?", [survivor]).fetchall()}
    back = [r for r in orjson.loads(records) if r in members]
    if not back:
        raise CorrectionError(f"none of cluster {absorbed}'s reports are still in cluster {survivor}")
    return split(warehouse, survivor, back, actor, reason=f"undo the LLM's merge of cluster {absorbed}")
