"""The clustering stage: embed new records, place them in clusters with stable ids, label.

Two views share the machinery: ``reports`` (duplicate reports of one problem, one thing agents
ask for, or one thing they praise) and ``goals`` (what agents were trying to do that the product
could not do). Records are partitioned by service and polarity (:func:`polarity_sql`); no cluster
ever spans two partitions.

A run only looks at records it has not placed yet and at earlier records that joined nothing.
Those are first offered to the existing clusters (:func:`place`); what stays
unplaced is clustered among itself. A record, once in a cluster, only moves when a maintainer
moves it, so ids and memberships are stable across runs by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl
import pyarrow as pa
from duckdb import DuckDBPyConnection

from ..config import DEFAULT_SHARD_SIZE, ClusteringConfig
from ..core import now_utc
from ..warehouse import Warehouse, registered, transaction
from ._algorithm import Placement, background, place
from ._assist import StageAssist, embedded_text
from ._backends import members_model, packaged
from ._confidence import ViewVectors, stored_confidence
from ._embedding import (
    Embedder,
    MapShards,
    embed_with_cache,
    in_process,
    own_words_sql,
    text_sha256,
    text_sql,
    to_matrix,
)
from ._labels import candidate_phrases, key_terms, medoid, phrase_names
from ._titles import choose_titles
from ._versions import LATEST, ClusteringVersion, in_force, recorded_version

VIEWS = ("reports", "goals")


#: The free text names and key terms are drawn from (the embedded text also names category and
#: tool), each left out where it only repeats the turn the report is about (:func:`own_words_sql`).
LABEL_FIELDS = ("summary", "detail", "expected", "actual")


#: The reports view's polarity of each lane that is not a problem: praise (never drafted) and a
#: request (a suggestion is demand, drafted as a feature request, not as a bug). Every other
#: lane is a problem.
POLARITY_BY_LANE = {"positive_feedback": "praise", "feature_request": "request"}
_REPORTS_POLARITY = (
    "CASE r.lane " + " ".join(f"WHEN '{lane}' THEN '{p}'" for lane, p in POLARITY_BY_LANE.items()) + " ELSE 'problem' END"
)
_GOALS_POLARITY = "CASE WHEN r.lane = 'positive_feedback' THEN 'praise' ELSE 'problem' END"


def polarity_sql(view: str) -> str:
    """The SQL of a record's (``r``) polarity in ``view``: in the reports view its lane's
    (:data:`POLARITY_BY_LANE`); in the goals view praise or problem, because what an agent asking for a
    capability was trying to do is as much a goal the product could not serve as a bug's."""
    return _REPORTS_POLARITY if view == "reports" else _GOALS_POLARITY


_PENDING = """
SELECT r.collector, r.id, r.service, {polarity} AS polarity, {text} AS text, m.id IS NULL AS fresh
FROM records r
LEFT JOIN cluster_members m ON m.view = $view AND m.collector = r.collector AND m.id = r.id
WHERE (m.id IS NULL OR (m.cluster_id IS NULL AND m.text_sha256 IS NOT NULL)) AND r.service IS NOT NULL {only}
ORDER BY r.received_at, r.collector, r.id
"""

_MEMBERS = """
SELECT m.cluster_id, c.service, c.polarity, e.vector, m.text_sha256,
       EXISTS (SELECT 1 FROM cluster_actions a
               WHERE a.action IN ('merge', 'split', 'move', 'undo') AND c.id IN (a.cluster_id, a.other_id)) AS curated
FROM cluster_members m
JOIN clusters c ON c.id = m.cluster_id
JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
WHERE m.view = $view AND c.status <> 'merged'
ORDER BY m.cluster_id, m.collector, m.id
"""


@dataclass(slots=True)
class ClusterRun:
    """What one run did, per view."""

    considered: dict[str, int] = field(default_factory=dict)
    joined: dict[str, int] = field(default_factory=dict)
    new_clusters: dict[str, int] = field(default_factory=dict)
    in_new: dict[str, int] = field(default_factory=dict)

    def unclustered(self, view: str = "reports") -> int:
        """Considered and in no cluster after the run, including left-overs a run with nothing
        new in their partition did not look at again."""
        return self.considered.get(view, 0) - self.joined.get(view, 0) - self.in_new.get(view, 0)

    def line(self, view: str = "reports") -> str:
        return (
            f"{self.considered.get(view, 0)} records considered, {self.joined.get(view, 0)} joined existing "
            f"clusters, {self.new_clusters.get(view, 0)} new clusters ({self.in_new.get(view, 0)} records), "
            f"{self.unclustered(view)} unclustered"
        )


def cluster_new_records(
    warehouse: Warehouse,
    embedder: Embedder,
    settings: ClusteringConfig = ClusteringConfig(),
    on_embed: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    map_shards: MapShards = in_process,
    shard_size: int = DEFAULT_SHARD_SIZE,
    assist: StageAssist | None = None,
) -> ClusterRun:
    """Place every record not yet in a cluster, in both views; returns the counts.

    The work that grows with volume runs through ``map_shards``: embedding in shards of
    ``shard_size`` texts, clustering one partition (service × polarity) per shard. The
    warehouse is read and written here only (DuckDB has one writer). With ``assist`` (the
    optional LLM, ``_assist_store.py``) problem reports are embedded with a problem statement,
    and the clusters a run touched are judged against their borderline neighbours and named."""
    summary = ClusterRun()
    # The version the warehouse's clusters were made with, not necessarily the newest default:
    # changing defaults never silently regroups (``_versions.py``; ``clusters rebuild`` upgrades).
    version = in_force(warehouse.con, settings)
    for view in VIEWS:
        _run_view(warehouse, embedder, version, view, summary, on_embed, on_total, map_shards, shard_size, assist)
    describe_stale(warehouse, embedder.model_id)
    return summary


def describe_stale(warehouse: Warehouse, model: str | None = None) -> list[int]:
    """Describe again the clusters an erasure took members from (``stale``): their label, key
    terms, medoid and tools must keep nothing of the erased reports. Returns their ids. The
    vectors are ``model``'s (default: the model the view's clusters are in)."""
    stale = warehouse.con.execute("SELECT view, list(id ORDER BY id) FROM clusters WHERE stale GROUP BY view").fetchall()
    with transaction(warehouse.con):
        for view, ids in stale:
            describe(warehouse, model or members_model(warehouse.con, view), view, set(ids))
        warehouse.con.execute("UPDATE clusters SET stale = false WHERE stale")
    return sorted(i for _, ids in stale for i in ids)


@dataclass(frozen=True, slots=True)
class _Partition:
    """One partition's clustering, a self-contained shard (arrays and settings only)."""

    pending: np.ndarray
    members: np.ndarray
    member_ids: np.ndarray
    settings: ClusteringConfig
    centre: np.ndarray
    fresh: np.ndarray
    curated: np.ndarray


def _place(p: _Partition) -> Placement:
    return place(p.pending, p.members, p.member_ids, p.settings, p.centre, fresh=p.fresh, curated=p.curated)


def _run_view(
    warehouse: Warehouse, embedder: Embedder, version: ClusteringVersion, view: str, summary: ClusterRun,
    on_embed: Callable[[int], None] | None, on_total: Callable[[int], None] | None, map_shards: MapShards, shard_size: int,
    assist: StageAssist | None = None,
) -> None:
    con = warehouse.con
    settings = version.settings
    text = version.text_sql(view)
    polarity = polarity_sql(view)
    only = f"AND {polarity} = 'problem' AND {text} IS NOT NULL" if view == "goals" else ""
    pending = con.sql(_PENDING.format(polarity=polarity, text=text, only=only), params={"view": view}).pl()
    summary.considered[view] = pending.height
    if pending.is_empty():
        return
    with_text = pending.filter(pl.col("text").is_not_null())
    texts = assist.texts(con, with_text, view) if assist else with_text.get_column("text").to_list()
    restored = _unembedded_members(con, embedder.model_id, version, view)
    if on_total:
        on_total(len(texts) + len(restored))
    sharded = None if map_shards is in_process else map_shards
    if restored:
        embed_with_cache(con, embedder, restored, on_batch=on_embed, map_shards=sharded, shard_size=shard_size)
    vectors = embed_with_cache(con, embedder, texts, on_batch=on_embed, map_shards=sharded, shard_size=shard_size)
    with_text = with_text.with_columns(pl.Series("text_sha256", [text_sha256(t) for t in texts], pl.String))
    members = _members(con, embedder.model_id, view, embedder.dimensions)
    # One centre for the whole view: the background every report shares (see the algorithm, _algorithm.py).
    every = np.vstack([members.vectors, vectors])
    centre = background(every)
    parts, shards = [], []
    for (service, polarity), part in with_text.with_row_index("row").group_by("service", "polarity", maintain_order=True):
        if not part.get_column("fresh").any():
            continue  # nothing new here: re-clustering the same leftovers would change nothing real
        mine = members.of(service, polarity)
        rows = part.get_column("row").to_numpy()
        parts.append((service, polarity, part))
        ids = members.cluster_ids[mine]
        shards.append(_Partition(vectors[rows], members.vectors[mine], ids, settings, centre,
                                 part.get_column("fresh").to_numpy(), np.unique(ids[members.curated[mine]])))
    placements = [(*key, placement) for key, placement in zip(parts, map_shards(_place, shards), strict=True)]
    no_text = pending.filter(pl.col("text").is_null() & pl.col("fresh"))
    with transaction(con):
        touched = _store(con, view, placements, no_text, summary, version.name)
        held = ViewVectors(pl.concat([members.text_sha256, with_text.get_column("text_sha256")]), every, centre)
        describe(warehouse, embedder.model_id, view, touched, embedder, held)
    if assist:
        assist.after_view(warehouse, embedder.model_id, view, touched)


_UNEMBEDDED = """
SELECT DISTINCT m.text_sha256, {text} AS text, s.statement
FROM cluster_members m JOIN records r USING (collector, id)
LEFT JOIN problem_statements s ON s.embedded_sha256 = m.text_sha256
WHERE m.view = $view AND m.cluster_id IS NOT NULL AND m.text_sha256 IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = $model AND e.text_sha256 = m.text_sha256)
"""


def _unembedded_members(con: DuckDBPyConnection, model: str, version: ClusteringVersion, view: str) -> list[str]:
    """The texts of cluster members that have no vector in ``model``'s space (the backend or
    precision changed since they were clustered), composed again as they were embedded (with
    their problem statement, if they had one): without them the clusters would be invisible to
    the new reports, and every problem would start a second cluster. A text that no longer
    composes to what was embedded (another version's) is left out, as before."""
    rows = con.sql(_UNEMBEDDED.format(text=version.text_sql(view)), params={"view": view, "model": model}).fetchall()
    texts = {}
    for sha, text, statement in rows:
        composed = embedded_text(statement, text) if statement and text else text
        if composed is not None and text_sha256(composed) == sha:
            texts[sha] = composed
    return list(texts.values())


def _store(con: DuckDBPyConnection, view: str, placements: list[tuple[str | None, str, pl.DataFrame, Placement]], no_text: pl.DataFrame, summary: ClusterRun,
           version: str | None = None) -> set[int]:
    """Create the new clusters and write every placement; returns the clusters that changed.
    New clusters record ``version``, the clustering version that made them (default: the
    warehouse's, ``_versions.py``)."""
    now = now_utc()
    version = version or recorded_version(con) or LATEST
    frames = [no_text.select(
        "collector", "id", pl.lit(None, pl.String).alias("text_sha256"),
        pl.lit(None, pl.Int64).alias("cluster_id"), pl.lit(None, pl.String).alias("assigned_by"),
    )]
    touched: set[int] = set()
    for service, polarity, part, placement in placements:
        cluster_id = placement.existing.copy()
        if placement.new_count:
            new_ids = _new_cluster_ids(con, view, service, polarity, placement.new_count, now, version)
            fresh = placement.new >= 0
            cluster_id[fresh] = new_ids[placement.new[fresh]]
        summary.joined[view] = summary.joined.get(view, 0) + int((placement.existing >= 0).sum())
        summary.new_clusters[view] = summary.new_clusters.get(view, 0) + placement.new_count
        summary.in_new[view] = summary.in_new.get(view, 0) + int((placement.new >= 0).sum())
        touched.update(int(c) for c in np.unique(cluster_id[cluster_id >= 0]))
        frames.append(
            part.select("collector", "id", "text_sha256")
            .with_columns(pl.Series("cluster_id", cluster_id), pl.Series("joined", placement.existing >= 0))
            .select(
                "collector", "id", "text_sha256",
                pl.when(pl.col("cluster_id") >= 0).then("cluster_id").alias("cluster_id"),
                pl.when("joined").then(pl.lit("nearest"))
                .when(pl.col("cluster_id") >= 0).then(pl.lit("hdbscan")).alias("assigned_by"),
            )
        )
    frame = pl.concat(frames, how="vertical_relaxed")
    _store_members(con, view, frame, now)
    return touched


@dataclass(slots=True)
class _Members:
    """Every clustered record of a view: vectors, cluster ids, partition keys, and whether a
    maintainer shaped the record's cluster (merged or split it)."""

    vectors: np.ndarray
    cluster_ids: np.ndarray
    #: Each member's partition, as an index into ``keys`` (computed once: a view has many
    #: partitions, and rescanning every member for each of them grew with their product).
    partition: np.ndarray
    keys: dict[tuple[str | None, str], int]
    curated: np.ndarray
    text_sha256: pl.Series

    def of(self, service: str | None, polarity: str) -> np.ndarray:
        key = self.keys.get((service, polarity))
        return self.partition == key if key is not None else np.zeros(len(self.partition), dtype=bool)


def _members(con: DuckDBPyConnection, model: str, view: str, dimensions: int) -> _Members:
    table = con.sql(_MEMBERS, params={"model": model, "view": view}).to_arrow_table()
    vectors = to_matrix(table.column("vector")) if table.num_rows else np.empty((0, dimensions), np.float32)
    frame = pl.from_arrow(table.select(["service", "polarity"]))
    assert isinstance(frame, pl.DataFrame)
    keyed = frame.with_columns(pl.struct("service", "polarity").rank("dense").cast(pl.Int64).alias("partition") - 1)
    keys = {(service, polarity): index for service, polarity, index in keyed.unique("partition").iter_rows()}
    curated = table.column("curated").to_numpy(zero_copy_only=False).astype(bool)
    return _Members(vectors, table.column("cluster_id").to_numpy().astype(np.int64),
                    keyed.get_column("partition").to_numpy(), keys, curated,
                    pl.Series("text_sha256", table.column("text_sha256").to_pylist(), pl.String))


def _new_cluster_ids(con: DuckDBPyConnection, view: str, service: str | None, polarity: str, count: int, now: datetime,
                     version: str = LATEST) -> np.ndarray:
    if count == 0:
        return np.empty(0, dtype=np.int64)
    ids = np.array(
        [row[0] for row in con.execute("SELECT nextval('cluster_ids') FROM range(?)", [count]).fetchall()],
        dtype=np.int64,
    )
    table = pa.table({"id": pa.array(ids)})
    with registered(con, "fresh_cluster_ids", table):
        con.execute(
            """INSERT INTO clusters (id, view, service, polarity, created_at, updated_at, config_version)
               SELECT id, ?, ?, ?, ?, ?, ? FROM fresh_cluster_ids""",
            [view, service, polarity, now, now, version],
        )
    return ids


def _store_members(con: DuckDBPyConnection, view: str, frame: pl.DataFrame, now: datetime) -> None:
    table = frame.with_columns(
        pl.lit(view).alias("view"),
        pl.when(pl.col("cluster_id").is_not_null()).then(pl.lit(now)).alias("assigned_at"),
    ).select("view", "collector", "id", "text_sha256", "cluster_id", "assigned_by", "assigned_at").to_arrow()
    with registered(con, "placed_members", table):
        con.execute("INSERT OR REPLACE INTO cluster_members SELECT * FROM placed_members")


_DESCRIBE_TEXTS = """
SELECT cluster, {text} AS text FROM (
    SELECT m.cluster_id AS cluster, r.* {own_words}
    FROM cluster_members m JOIN records r USING (collector, id)
    LEFT JOIN clusters c ON c.id = m.cluster_id
    WHERE m.view = $view AND coalesce(c.service, r.service) IS NOT DISTINCT FROM $service
      AND coalesce(c.polarity, {polarity}) = $polarity  -- a moved report describes the cluster it was moved to
      AND coalesce(c.status, '') <> 'merged'
) r
"""

_TOP_TOOLS = """
SELECT m.cluster_id, list(tool ORDER BY n DESC, tool)[:3]
FROM (
    SELECT m.cluster_id, r.tool, count(*) AS n
    FROM cluster_members m JOIN records r USING (collector, id)
    WHERE m.view = $view AND r.tool IS NOT NULL AND m.cluster_id IN (SELECT unnest($ids))
    GROUP BY ALL
) m GROUP BY ALL
"""


def describe(warehouse: Warehouse, model: str, view: str, cluster_ids: set[int], embedder: Embedder | None = None,
             held: ViewVectors | None = None) -> None:
    """(Re)compute name, key terms, medoid, top tools and confidence of the given clusters, and
    record the clustering version of those that have none yet (made by a maintainer's split).
    ``held``: the view's vectors and centre, when the caller has them at hand (a clustering run).

    The name is one of the members' summaries, chosen with ``model``'s vectors (``_titles.py``);
    titles not cached yet are embedded with ``embedder``, or with the packaged model, built only
    then, when ``model`` is its id (another model without an embedder judges titles by their
    reports' vectors alone). A cluster without a usable summary is named by a phrase
    (``_labels.py``)."""
    if not cluster_ids:
        return
    con = warehouse.con
    ids = sorted(cluster_ids)
    partitions = con.execute(
        "SELECT DISTINCT service, polarity FROM clusters WHERE id IN (SELECT unnest(?))", [ids]
    ).fetchall()
    terms: dict[int, list[str]] = {}
    candidates = []
    for service, polarity in partitions:
        texts = con.sql(
            _DESCRIBE_TEXTS.format(text=text_sql(view, fields=LABEL_FIELDS if view == "reports" else None),
                                   polarity=polarity_sql(view), own_words=own_words_sql("r")),
            params={"view": view, "service": service, "polarity": polarity},
        ).pl()
        terms.update(key_terms(texts))
        candidates.append(candidate_phrases(texts.filter(pl.col("cluster").is_in(ids)), terms))
    tools = dict(con.execute(_TOP_TOOLS, {"view": view, "ids": ids}).fetchall())
    main_tools = dict(con.execute(_MAIN_TOOL, {"view": view, "ids": ids}).fetchall())
    medoids, centroids = _medoids(con, model, view, ids)
    vectors_of = _phrase_vectors(con, model, embedder)
    names = _titles(con, model, view, ids, main_tools, vectors_of)
    unnamed = [i for i in ids if i not in names]
    phrases = pl.concat(candidates).filter(pl.col("cluster").is_in(unnamed))
    names.update(phrase_names(phrases, centroids, {i: main_tools.get(i) for i in unnamed}, vectors_of))
    confidences = stored_confidence(con, model, view, ids, polarity_sql(view), held=held)
    now = now_utc()
    rows = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "key_terms": pa.array([terms.get(i, []) for i in ids], pa.list_(pa.string())),
            "label": pa.array([names.get(i) or " · ".join(terms.get(i, [])[:3]) or None for i in ids], pa.string()),
            "top_tools": pa.array([tools.get(i) or [] for i in ids], pa.list_(pa.string())),
            "medoid_collector": pa.array([medoids.get(i, (None, None))[0] for i in ids], pa.string()),
            "medoid_id": pa.array([medoids.get(i, (None, None))[1] for i in ids], pa.string()),
        }
    )
    with registered(con, "described", rows), registered(con, "confident", confidences.to_arrow()):
        con.execute(
            """UPDATE clusters c SET key_terms = d.key_terms, top_tools = d.top_tools, label = coalesce(c.given_name, d.label),
                   medoid_collector = d.medoid_collector, medoid_id = d.medoid_id, updated_at = ?,
                   confidence = f.confidence, needs_review = coalesce(f.needs_review, false),
                   config_version = coalesce(c.config_version, ?)
               FROM described d LEFT JOIN confident f USING (id) WHERE c.id = d.id""",
            [now, recorded_version(con) or LATEST],
        )


#: The tool (or endpoint) at least half of a cluster's members name, most named first.
_MAIN_TOOL = """
SELECT cluster_id, list(tool ORDER BY n DESC, tool)[1] FROM (
    SELECT m.cluster_id, r.tool, count(*) AS n, sum(count(*)) OVER (PARTITION BY m.cluster_id) AS members
    FROM cluster_members m JOIN records r USING (collector, id)
    WHERE m.view = $view AND m.cluster_id IN (SELECT unnest($ids))
    GROUP BY m.cluster_id, r.tool
) WHERE tool IS NOT NULL AND 2 * n >= members
GROUP BY cluster_id
"""


_TITLE_MEMBERS = """
SELECT m.cluster_id AS cluster, r.account, r.{field} AS summary, e.vector
FROM cluster_members m JOIN (SELECT r.* {own_words} FROM records r) r USING (collector, id)
JOIN embeddings e ON e.model = $model AND e.text_sha256 = m.text_sha256
WHERE m.view = $view AND m.cluster_id IN (SELECT unnest($ids))
ORDER BY m.cluster_id, m.collector, m.id
"""


def _titles(con: DuckDBPyConnection, model: str, view: str, ids: list[int], things: dict[int, str | None],
            vectors_of: Callable[[list[str]], np.ndarray] | None) -> dict[int, str]:
    """Each cluster's name from its members' summaries (goals, for goal themes): ``_titles.py``."""
    table = con.sql(_TITLE_MEMBERS.format(field="summary" if view == "reports" else "goal", own_words=own_words_sql("r")),
                    params={"model": model, "view": view, "ids": ids}).to_arrow_table()
    if table.num_rows == 0:
        return {}
    members = pl.from_arrow(table.drop(["vector"]))
    assert isinstance(members, pl.DataFrame)
    return choose_titles(members, to_matrix(table.column("vector")), things, vectors_of)


def _phrase_vectors(con: DuckDBPyConnection, model: str, embedder: Embedder | None) -> Callable[[list[str]], np.ndarray] | None:
    """Names (titles, phrases) to unit vectors in ``model``'s space, cached in ``embeddings``; None when no
    embedder of that model is at hand (given, or the packaged model on one of its backends)."""
    chosen = embedder if embedder is not None else packaged(model)
    if chosen is None:
        return None
    return lambda phrases: embed_with_cache(con, chosen, phrases)


def _medoids(
    con: DuckDBPyConnection, model: str, view: str, ids: list[int]
) -> tuple[dict[int, tuple[str, str]], dict[int, np.ndarray]]:
    """Each cluster's medoid (collector, id) and centroid (the unit mean of its vectors)."""
    table = con.sql(
        """SELECT m.cluster_id, m.collector, m.id, e.vector FROM cluster_members m
           JOIN embeddings e ON e.model = ? AND e.text_sha256 = m.text_sha256
           WHERE m.view = ? AND m.cluster_id IN (SELECT unnest(?))
           ORDER BY m.cluster_id, m.collector, m.id""",
        params=[model, view, ids],
    ).to_arrow_table()
    if table.num_rows == 0:
        return {}, {}
    vectors = to_matrix(table.column("vector"))
    cluster = table.column("cluster_id").to_numpy()
    collectors = table.column("collector").to_pylist()
    record_ids = table.column("id").to_pylist()
    starts = np.flatnonzero(np.r_[True, cluster[1:] != cluster[:-1]])
    ends = np.r_[starts[1:], len(cluster)]
    out, centroids = {}, {}
    for s, e in zip(starts, ends, strict=True):
        best = s + medoid(vectors[s:e])
        out[int(cluster[s])] = (collectors[best], record_ids[best])
        total = vectors[s:e].sum(axis=0)
        centroids[int(cluster[s])] = total / max(float(np.linalg.norm(total)), 1e-12)
    return out, centroids
