"""``clusters rebuild``: re-cluster every report with the configured clustering version.

A warehouse keeps clustering with the version its clusters were made with (``_versions.py``);
this is the one way to move it to another, Sentry's "upgrade grouping" with the old groups
carried over. Per view, in one transaction:

1. **What stays put.** Records a maintainer placed (``assigned_by = 'maintainer'``: a split or
   a move) and every member of a cluster a maintainer merged, split or moved into keep their
   cluster: a correction is a statement about those reports that no new default overrides.
2. **Re-cluster the rest** from scratch, partition by partition, with the version's settings
   and its text composition, the kept clusters offered to them first by the joining rule (as a
   run offers new reports to existing clusters).
3. **Map old ids to new.** Each new cluster takes the id of the old cluster it shares most
   members with, largest overlaps first, each old id once; one with no old counterpart left
   gets a fresh id. So filed issues, drafts and known_issue entries keep their cluster, and a
   successor keeps its old row: an ignored cluster stays ignored, a fixed one fixed.
4. **Old clusters with no successor** are ``merged`` into the new cluster that holds most of
   their former members (``merged_into``: whatever names them resolves, as after a maintainer's
   merge), or, when none of their members is clustered any more, ``dissolved`` (no members;
   kept so that a name still resolves to something that says what happened).
5. Every cluster of the view records the new version; each old cluster's fate and each fresh
   cluster is a ``rebuild`` row in ``cluster_actions``; the view is described again (names,
   confidence).

``dry_run`` computes the same mapping and writes nothing but the embedding cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from ..config import ClusteringConfig
from ..core import now_utc
from ..warehouse import Warehouse, registered, transaction
from ._algorithm import background, place
from ._assist import StageAssist
from ._embedding import Embedder, embed_with_cache, text_sha256
from ._stage import VIEWS, describe, polarity_sql
from ._versions import ClusteringVersion, recorded_version, version, with_overrides

#: Called inside a rebuild's transaction with each cluster that lost its place and its
#: successor (None: dissolved).
Absorbed = Callable[[dict[int, int | None]], None]

#: The view's reports: their text in the new version, their old cluster, and whether a
#: maintainer's correction keeps them there; a kept report stays in its cluster's partition
#: (a maintainer may have moved a problem report among praise).
_REPORTS = """
SELECT collector, id, CASE WHEN kept THEN c_service ELSE service END AS service,
       CASE WHEN kept THEN c_polarity ELSE polarity END AS polarity, text, old, kept
FROM (
    SELECT m.collector, m.id, r.service, {polarity} AS polarity, c.service AS c_service, c.polarity AS c_polarity,
           {text} AS text, m.cluster_id AS old, r.received_at,
           m.cluster_id IS NOT NULL AND (m.assigned_by = 'maintainer' OR m.cluster_id IN (
               SELECT unnest([a.cluster_id, a.other_id]) FROM cluster_actions a
               WHERE a.action IN ('merge', 'split', 'move', 'undo') AND a.actor NOT LIKE 'llm:%')) AS kept
    FROM cluster_members m JOIN records r USING (collector, id) LEFT JOIN clusters c ON c.id = m.cluster_id
    WHERE m.view = $view
)
ORDER BY received_at, collector, id
"""


@dataclass(slots=True)
class ViewRebuild:
    """What a rebuild did to one view's clusters."""

    kept: dict[int, int] = field(default_factory=dict)  # old id → members it keeps (pinned by a maintainer)
    mapped: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # old id → members before, now, shared
    fresh: dict[int, int] = field(default_factory=dict)  # new id → members
    merged: dict[int, int] = field(default_factory=dict)  # old id → the cluster it was merged into
    dissolved: list[int] = field(default_factory=list)
    clustered: int = 0
    unclustered: int = 0


@dataclass(slots=True)
class Rebuild:
    """The mapping per view, from which version to which."""

    from_version: str | None
    to_version: str
    dry_run: bool
    views: dict[str, ViewRebuild] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The summary ``clusters rebuild`` prints."""
        verb = "would re-cluster" if self.dry_run else "re-clustered"
        out = [f"{verb} with clustering version {self.to_version} (was {self.from_version or 'none'})"]
        for view, r in self.views.items():
            out.append(
                f"{view}: {r.clustered} reports clustered, {r.unclustered} unclustered; {len(r.mapped)} clusters keep "
                f"their id ({sum(b == n == s for b, n, s in r.mapped.values())} unchanged), {len(r.kept)} kept as a maintainer left them, {len(r.fresh)} new, {len(r.merged)} merged "
                f"into a successor, {len(r.dissolved)} dissolved"
            )
            out.extend(f"  {old}: {before} → {now} reports ({shared} of them as before)"
                       for old, (before, now, shared) in sorted(r.mapped.items()) if not before == now == shared)
            out.extend(f"  {old} → merged into {into}" for old, into in sorted(r.merged.items()))
            out.extend(f"  {old} → dissolved" for old in r.dissolved)
            out.extend(f"  new {new} ({n} reports)" for new, n in sorted(r.fresh.items()))
        return out


def rebuild(warehouse: Warehouse, embedder: Embedder, configured: ClusteringConfig, actor: str,
            dry_run: bool = False, then: Absorbed | None = None, assist: StageAssist | None = None) -> Rebuild:
    """Re-cluster every report the stage has seen with ``configured``'s version (and its
    explicit knobs), keeping ids where members overlap (module docstring). ``then`` runs inside
    the transaction with the clusters that lost their place: each merged-away cluster's
    successor, None for a dissolved one (so the drafts layer can treat their drafts as after a
    maintainer's merge); raising undoes the whole rebuild. With ``assist`` (``[llm] clustering``
    with ``statements``) reports are embedded with their problem statements, as a run embeds
    them; the model's merges are not redone (a rebuild starts from the embeddings) and its
    names come back with the next run (cached by evidence)."""
    target = with_overrides(version(configured.version), configured)
    con = warehouse.con
    result = Rebuild(recorded_version(con), target.name, dry_run)
    planned = {view: _plan(warehouse, embedder, target, view, assist) for view in VIEWS}
    if dry_run:
        result.views = {view: plan.summary for view, plan in planned.items()}
        return result
    with transaction(con):
        for view, plan in planned.items():
            _apply(warehouse, plan, view, target, actor, f"clustering version {result.from_version or 'none'} → {target.name}")
            result.views[view] = plan.summary
        if then is not None:
            then({old: into for r in result.views.values() for old, into in
                  [*r.merged.items(), *((d, None) for d in r.dissolved)]})
    for view in planned:
        live = con.execute(
            "SELECT list(id) FROM clusters WHERE view = ? AND status NOT IN ('merged', 'dissolved')", [view]
        ).fetchall()[0][0] or []
        describe(warehouse, embedder.model_id, view, set(live), embedder)
    return result


@dataclass(slots=True)
class _Plan:
    members: pl.DataFrame  # collector, id, old, kept, text_sha256, new: a kept cluster's id, -1 (none), < -1 (a new cluster)
    new_ids: dict[int, int | None]  # local label → old id it takes (None: a fresh id)
    summary: ViewRebuild


def _plan(warehouse: Warehouse, embedder: Embedder, target: ClusteringVersion, view: str,
          assist: StageAssist | None) -> _Plan:
    """Re-cluster one view in memory and map the new clusters onto the old."""
    con = warehouse.con
    text = target.text_sql(view)
    reports = con.sql(_REPORTS.format(polarity=polarity_sql(view), text=text), params={"view": view}).pl()
    with_text = reports.filter(pl.col("text").is_not_null())
    texts = assist.texts(con, with_text, view) if assist and with_text.height else with_text.get_column("text").to_list()
    vectors = embed_with_cache(con, embedder, texts) if texts else np.empty((0, embedder.dimensions), np.float32)
    centre = background(vectors) if len(vectors) else None
    labels = np.full(with_text.height, -1, dtype=np.int64)
    offset = 0
    for _, part in with_text.with_row_index("row").group_by("service", "polarity", maintain_order=True):
        rows = part.get_column("row").to_numpy()
        kept = part.get_column("kept").to_numpy()
        old = part.get_column("old").fill_null(-1).to_numpy().astype(np.int64)
        placed = place(vectors[rows[~kept]], vectors[rows[kept]], old[kept], target.settings, centre,
                       curated=np.unique(old[kept]))
        labels[rows[kept]] = old[kept]
        joined = np.where(placed.existing >= 0, placed.existing, -1)
        fresh = np.where(placed.new >= 0, -(placed.new + 2 + offset), -1)  # new clusters: labels below -1
        labels[rows[~kept]] = np.where(joined >= 0, joined, np.where(placed.new >= 0, fresh, -1))
        offset += placed.new_count
    members = with_text.select("collector", "id", "old", "kept").with_columns(
        pl.Series("text_sha256", [text_sha256(t) for t in texts], pl.String), pl.Series("new", labels, pl.Int64),
    )
    # Without words there is nothing to cluster: out of every cluster, unless a maintainer put it in one.
    no_text = reports.filter(pl.col("text").is_null()).select(
        "collector", "id", "old", "kept", pl.lit(None, pl.String).alias("text_sha256"),
        pl.when("kept").then("old").otherwise(-1).cast(pl.Int64).alias("new"),
    )
    live = con.sql(
        "SELECT id FROM clusters WHERE view = $view AND status NOT IN ('merged', 'dissolved')", params={"view": view}
    ).pl()
    return _map(live, pl.concat([members, no_text], how="vertical_relaxed"))


def _map(old_clusters: pl.DataFrame, members: pl.DataFrame) -> _Plan:
    """Give each new cluster (negative label) the old id it overlaps most, greedily, largest
    overlap first; the kept clusters (positive labels) are their own successors."""
    summary = ViewRebuild()
    kept_ids = set(members.filter(pl.col("kept")).get_column("old").unique().to_list())
    new_members = members.filter(pl.col("new") < -1)
    overlaps = (
        new_members.filter(pl.col("old").is_not_null() & ~pl.col("old").is_in(list(kept_ids)))
        .group_by("new", "old").len("shared")
        .sort(["shared", "old", "new"], descending=[True, False, True])
    )
    taken_old: set[int] = set()
    new_ids: dict[int, int | None] = {}
    for new, old, _ in overlaps.iter_rows():
        if new in new_ids or old in taken_old:
            continue
        new_ids[new] = old
        taken_old.add(old)
    for new in new_members.get_column("new").unique().sort(descending=True).to_list():
        new_ids.setdefault(new, None)
    sizes = dict(members.filter(pl.col("new") != -1).group_by("new").len().iter_rows())
    before = dict(members.filter(pl.col("old").is_not_null()).group_by("old").len().iter_rows())
    shared = {(n, o): s for n, o, s in overlaps.iter_rows()}
    for new, old in new_ids.items():
        if old is None:
            summary.fresh[new] = sizes[new]
        else:
            summary.mapped[old] = (before[old], sizes[new], shared[(new, old)])
    for old in kept_ids:
        summary.kept[int(old)] = sizes.get(old, 0)
    # Old clusters with no successor: merged into where most of their members went, else dissolved.
    for old in sorted(set(old_clusters.get_column("id").to_list()) - taken_old - kept_ids):
        went = members.filter((pl.col("old") == old) & (pl.col("new") != -1)).group_by("new").len().sort(
            ["len", "new"], descending=[True, False])
        if went.is_empty():
            summary.dissolved.append(old)
        else:
            summary.merged[old] = went.item(0, "new")  # a local label until applied
    summary.clustered = int((members.get_column("new") != -1).sum())
    summary.unclustered = members.height - summary.clustered
    return _Plan(members, new_ids, summary)


def _apply(warehouse: Warehouse, plan: _Plan, view: str, target: ClusteringVersion, actor: str, reason: str) -> None:
    """Write one view's rebuild: fresh ids, members, fates, versions, actions."""
    con = warehouse.con
    now = now_utc()
    fresh = pl.DataFrame({"new": [n for n, o in plan.new_ids.items() if o is None]}, schema={"new": pl.Int64})
    with registered(con, "plan_members", plan.members.to_arrow()), registered(con, "plan_fresh", fresh.to_arrow()):
        created = con.sql(
            f"""SELECT f.new, nextval('cluster_ids')::BIGINT AS cluster_id, any_value(r.service) AS service,
                       any_value({polarity_sql(view)}) AS polarity
                FROM plan_fresh f JOIN plan_members p USING (new) JOIN records r USING (collector, id)
                GROUP BY f.new ORDER BY f.new DESC"""
        ).pl()
    with registered(con, "created", created.to_arrow()):
        con.execute(
            """INSERT INTO clusters (id, view, service, polarity, created_at, updated_at, config_version)
               SELECT cluster_id, ?, service, polarity, ?, ?, ? FROM created""",
            [view, now, now, target.name],
        )
    ids = {new: old for new, old in plan.new_ids.items() if old is not None} | dict(
        created.select("new", "cluster_id").iter_rows()
    )
    mapping = pa.table({"new": pa.array(list(ids), pa.int64()), "cluster_id": pa.array(list(ids.values()), pa.int64())})
    with registered(con, "plan_members", plan.members.to_arrow()), registered(con, "plan_ids", mapping):
        con.execute(
            """UPDATE cluster_members m SET
                   cluster_id = CASE WHEN p.kept THEN m.cluster_id WHEN p.new >= 0 THEN p.new ELSE i.cluster_id END,
                   text_sha256 = coalesce(p.text_sha256, CASE WHEN p.kept THEN m.text_sha256 END),
                   assigned_by = CASE WHEN p.kept THEN m.assigned_by WHEN p.new = -1 THEN NULL ELSE 'rebuild' END,
                   assigned_at = CASE WHEN p.kept THEN m.assigned_at WHEN p.new = -1 THEN NULL ELSE ? END
               FROM plan_members p LEFT JOIN plan_ids i USING (new)
               WHERE m.view = ? AND m.collector = p.collector AND m.id = p.id""",
            [now, view],
        )
        # An old id taken by a cluster of another partition moves with it: a warehouse clustered
        # before feature requests had a partition of their own keeps their clusters' ids.
        con.execute(
            f"""UPDATE clusters c SET service = n.service, polarity = n.polarity, updated_at = ?
                FROM (SELECT i.cluster_id, any_value(r.service) AS service, any_value({polarity_sql(view)}) AS polarity
                      FROM plan_members p JOIN plan_ids i USING (new) JOIN records r USING (collector, id)
                      WHERE p.new < -1 GROUP BY i.cluster_id) n
                WHERE c.id = n.cluster_id AND (c.service IS DISTINCT FROM n.service OR c.polarity <> n.polarity)""",
            [now],
        )
    summary = plan.summary
    summary.merged = {old: ids.get(into, into) for old, into in summary.merged.items()}
    summary.fresh = {ids[new]: n for new, n in summary.fresh.items()}
    fates = pl.DataFrame(
        [(old, None, "keeps its id") for old in summary.mapped]
        + [(old, None, "kept as a maintainer left it") for old in summary.kept]
        + [(old, into, "merged into its successor") for old, into in summary.merged.items()]
        + [(old, None, "dissolved: none of its reports is clustered") for old in summary.dissolved]
        + [(new, None, "new") for new in summary.fresh],
        schema={"cluster_id": pl.Int64, "other_id": pl.Int64, "fate": pl.String}, orient="row",
    )
    with registered(con, "fates", fates.to_arrow()):
        con.execute(
            """UPDATE clusters c SET status = CASE WHEN f.other_id IS NOT NULL THEN 'merged' ELSE 'dissolved' END,
                   merged_into = f.other_id, updated_at = ?
               FROM fates f WHERE c.id = f.cluster_id AND f.fate IN ('merged into its successor',
                                                                   'dissolved: none of its reports is clustered')""",
            [now],
        )
        # Anything that pointed at a merged-away cluster now points at its successor.
        con.execute(
            """UPDATE clusters c SET merged_into = f.other_id FROM fates f
               WHERE c.merged_into = f.cluster_id AND f.other_id IS NOT NULL"""
        )
        # A name a maintainer gave goes with the reports to their successor, unless it has one.
        con.execute(
            """UPDATE clusters s SET given_name = x.given_name, label = x.given_name
               FROM clusters x JOIN fates f ON f.cluster_id = x.id
               WHERE f.other_id = s.id AND x.given_name IS NOT NULL AND s.given_name IS NULL"""
        )
        con.execute(
            """INSERT INTO cluster_actions (action, cluster_id, other_id, reason, actor, acted_at)
               SELECT 'rebuild', cluster_id, other_id, ? || ': ' || fate, ?, ? FROM fates ORDER BY cluster_id""",
            [reason, actor, now],
        )
    con.execute("UPDATE clusters SET config_version = ?, updated_at = ? WHERE view = ?", [target.name, now, view])
