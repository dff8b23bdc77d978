"""Versioned clustering configs, the way Sentry versions its grouping configs.

Sentry keeps every grouping config it ever shipped in a registry of frozen, named entries
(``grouping/strategies/configurations.py``: an id, a base, a changelog); a project records the
config its issues were grouped with and keeps using it when a newer default ships, until someone
upgrades it, and the upgrade maps old groups onto new ones so existing issues keep their events.
Here the same, for clusters:

- :data:`VERSIONS` holds each version's settings (every :class:`ClusteringConfig` knob,
  ``algorithm`` among them: the revision of the algorithm's steps, so an old version runs its
  own code path and not only its old numbers) and the text it embeds (which fields, in which
  order; how few words make a report too vague). A
  version is never edited once released: a change of defaults is a new version, and
  ``tests/test_cluster_versions.py`` fails when the defaults of ``ClusteringConfig`` are not
  those of the latest version.
- Each cluster records the version that made it (``clusters.config_version``). The version **in
  force** for a warehouse is the one its clusters were made with — the newest cluster's, when a
  rebuild was interrupted — and, for a warehouse with no cluster yet, the configured one
  (``[clustering] version``, default the latest). So a warehouse clustered by version 1 goes on
  clustering new records with version 1's settings after an upgrade of the code, and only
  ``feedback-insights clusters rebuild`` (``clusters/_rebuild.py``) moves it to the configured
  version. No second place holds the state: the clusters say what made them.
- Knobs a config file sets explicitly (``[clustering] min_cohesion = 0.5``) apply on top of the
  version in force: they are the maintainer's choice, not a change of defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from duckdb import DuckDBPyConnection

from ..config import ClusteringConfig
from ._embedding import text_sql


@dataclass(frozen=True, slots=True)
class ClusteringVersion:
    """One released clustering config: its knobs and the text it embeds."""

    name: str
    settings: ClusteringConfig
    #: The record's fields embedded for the reports view, in order (``TEXT_COMPOSITION``).
    text_composition: tuple[str, ...]
    #: The turn lines added after them: (JSON column, key, label) (``TURN_CONTEXT``).
    turn_context: tuple[tuple[str, str, str], ...]
    #: Fewer words of a report's own than this: too vague to cluster (``MIN_WORDS``).
    min_words: int
    changelog: str

    def text_sql(self, view: str) -> str:
        """The SQL of the text this version embeds for ``view`` (goals: ``goal`` alone, in every version)."""
        if view != "reports":
            return text_sql(view)
        return text_sql(view, fields=self.text_composition, turn=self.turn_context, min_words=self.min_words)


_V1 = ClusteringVersion(
    name="1",
    settings=ClusteringConfig(
        version="1", algorithm=1, pca_dimensions=64, neighbours=15, min_cluster_size=2, min_samples=2, merge_similarity=0.5,
        join_centroid=0.4, join_nearest=0.5, min_cohesion=0.42, separation=0.01, smooth_from=7, smooth_keep=0.3,
        smooth_rounds=2, smoothed_merge_similarity=0.75, smoothed_separation=0.03, approximate_from=20_000,
    ),
    text_composition=("category", "tool", "summary", "detail", "expected", "actual", "suggestion"),
    turn_context=(),
    min_words=4,
    changelog="The first versioned defaults (issue 17): HDBSCAN on shared neighbours, smoothing, the cohesion and separation gate.",
)

# Version 2: the defaults of issue 18 (smoothing reach from the typical report's cluster, the
# smoothed gate on nearest co-members, members re-checked on their own vectors; the turn lines).
_V2 = ClusteringVersion(
    name="2",
    settings=ClusteringConfig(
        version="2", algorithm=2, pca_dimensions=64, neighbours=15, min_cluster_size=2, min_samples=2, merge_similarity=0.5,
        join_centroid=0.4, join_nearest=0.5, min_cohesion=0.42, separation=0.01, smooth_from=5, smooth_keep=0.3,
        smooth_rounds=2, smoothed_merge_similarity=0.75, smoothed_separation=0.03, member_separation=-0.02,
        approximate_from=20_000,
    ),
    text_composition=("category", "tool", "summary", "detail", "expected", "actual", "suggestion"),
    turn_context=(
        ("evidence", "target_text", "the reply it is about: "),
        ("evidence", "context.ai_response_snippet", "the reply it is about: "),
        ("evidence", "prompt_text", "the turn before: "),
        ("evidence", "context.user_query", "the turn before: "),
        ("context", "dictation", "voice input heard as: "),
    ),
    min_words=4,
    changelog="Issue 18: settings that hold on unseen corpora, and more of the record where a complaint is short.",
)

# Version 3: version 2's knobs and text; algorithm revision 3 (where a partition is smoothed,
# joiners are re-checked on their own vectors and what the gates left out gets a second chance).
_V3 = dataclasses.replace(
    _V2,
    name="3",
    settings=_V2.settings.model_copy(update={"version": "3", "algorithm": 3}),
    changelog="Issue 20: a run over everything at once and the same reports over two runs agree (steps 9 and 10 "
              "for joiners and left-overs), so an incremental run no longer re-admits what the re-check took out.",
)

# Version 4: version 3's knobs and text; algorithm revision 4 (where problems come in twos and
# threes, clusters are cliques of pair-grade reports: ``_duplicates.py``).
_V4 = dataclasses.replace(
    _V3,
    name="4",
    settings=_V3.settings.model_copy(update={"version": "4", "algorithm": 4}),
    changelog="Issue 31: problems, not topics — where a typical problem has two or three reports, a cluster is a "
              "clique of reports each pair of which stands out of its neighbourhood (step 11), so a topic of "
              "look-alikes no longer chains into one cluster.",
)

#: Every released version, oldest first.
VERSIONS: dict[str, ClusteringVersion] = {v.name: v for v in (_V1, _V2, _V3, _V4)}
#: The newest version: ``ClusteringConfig``'s default.
LATEST = ClusteringConfig().version
if LATEST not in VERSIONS:  # a new default version must be registered above
    raise RuntimeError(f"ClusteringConfig's default version {LATEST!r} is not in clusters/_versions.py")


class UnknownVersion(ValueError):
    """A version no release defined."""


def version(name: str) -> ClusteringVersion:
    """The released version ``name``."""
    if name not in VERSIONS:
        raise UnknownVersion(f"unknown clustering version {name!r}; known: {', '.join(VERSIONS)}")
    return VERSIONS[name]


def recorded_version(con: DuckDBPyConnection) -> str | None:
    """The version the warehouse's clusters were made with (the newest cluster's); None before
    the first cluster."""
    rows = con.execute(
        "SELECT config_version FROM clusters WHERE config_version IS NOT NULL ORDER BY id DESC LIMIT 1"
    ).fetchall()
    return rows[0][0] if rows else None


def in_force(con: DuckDBPyConnection, configured: ClusteringConfig = ClusteringConfig()) -> ClusteringVersion:
    """The version a run on this warehouse clusters with, its settings being ``configured``'s
    explicit knobs over the version's defaults (module docstring)."""
    version(configured.version)  # an unknown configured version is an error even where clusters say which
    return with_overrides(version(recorded_version(con) or configured.version), configured)


def with_overrides(base: ClusteringVersion, configured: ClusteringConfig) -> ClusteringVersion:
    """``base`` with the knobs ``configured`` sets explicitly (not its version)."""
    explicit = {k: getattr(configured, k) for k in configured.model_fields_set if k != "version"}
    if not explicit:
        return base
    settings = base.settings.model_copy(update=explicit)
    return dataclasses.replace(base, settings=settings)
