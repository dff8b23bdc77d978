"""How reports are embedded, clustered and ranked: the clustering stage's settings.

:class:`ClusteringConfig` is the one definition of the algorithm's knobs: the algorithm
(:mod:`feedback_insights.clusters`) takes it as its settings, so a default lives here only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ._base import Strict

DEFAULT_HALF_LIFE_DAYS = 14.0


class EmbeddingConfig(Strict):
    """The packaged all-MiniLM-L6-v2 model, on the CPU."""

    backend: Literal["onnx", "torch"] = Field(
        "onnx", description="ONNX Runtime (the same vectors, faster) or torch (sentence-transformers)"
    )
    precision: Literal["fp32", "int8"] = Field(
        "fp32", description="int8: ONNX Runtime's dynamic quantisation (onnx only; faster, different vectors)"
    )
    onnx_cache: Path | None = Field(None, description="where the exported model is kept (default ~/.cache/feedback-insights/onnx)")
    batch_size: int = Field(32, ge=1, le=1024, description="32 is the fastest measured on 2 cores")
    threads: int | None = Field(None, ge=1, le=256, description="threads per process; default one per usable core")
    known_issue_similarity: float = Field(
        0.68, gt=-1, lt=1,
        description="cosine to a filed problem's centroid from which a new report of its service is that known issue "
        "(collectors tell it so; the desk's lookalikes); the lowest at which the false-known rate over the shared "
        "corpora is at most 5 % (benchmarks/known_issues.py)",
    )

    @model_validator(mode="after")
    def _int8_is_onnx(self) -> EmbeddingConfig:
        if self.precision == "int8" and self.backend != "onnx":
            raise ValueError("precision int8 needs backend onnx")
        return self


class ClusteringConfig(Strict):
    """How reports become clusters (the clusters package's algorithm module says what each knob
    does; defaults measured by benchmarks/cluster_quality.py)."""

    version: str = Field(
        "4", pattern=r"^[0-9]+$",
        description="released defaults to start from (clusters/_versions.py; a warehouse keeps the version its clusters were made with until `clusters rebuild`)",
    )
    algorithm: int = Field(
        4, ge=1, le=4,
        description="the revision of the algorithm's steps a version runs (clusters/_algorithm.py says what each adds)",
    )
    pca_dimensions: int = Field(64, ge=2, le=1024)
    neighbours: int = Field(15, ge=2, le=200)
    min_cluster_size: int = Field(2, ge=2, le=100)
    min_samples: int = Field(2, ge=1, le=100)
    merge_similarity: float = Field(0.5, gt=-1, lt=1)
    join_centroid: float = Field(0.4, gt=-1, lt=1, description="cosine to the nearest centroid a report needs to join")
    join_nearest: float = Field(0.5, gt=-1, lt=1, description="… and to the nearest member of that cluster")
    min_cohesion: float = Field(0.42, gt=-1, lt=1, description="mean pairwise cosine below which a cluster dissolves")
    separation: float = Field(
        0.01, gt=-1, lt=1, description="… or how much more alike members must be than to their nearest outsiders"
    )
    smooth_from: int = Field(
        5, ge=1, le=10_000,
        description="smooth vectors when a typical clustered report's first-pass cluster has twice this many other "
        "members (then each is smoothed towards half of them)",
    )
    smooth_keep: float = Field(0.3, ge=0, le=1, description="share of a report's own vector kept in each round")
    smooth_rounds: int = Field(2, ge=1, le=10)
    smoothed_merge_similarity: float = Field(0.75, gt=-1, lt=1, description="merge_similarity on smoothed vectors")
    smoothed_separation: float = Field(
        0.03, gt=-1, lt=1, description="separation on smoothed vectors (nearest co-members against nearest outsiders)"
    )
    approximate_from: int = Field(
        20_000, ge=2,
        description="partition size from which nearest neighbours come from an approximate index (usearch), not "
        "exact matrix products: the cost of clustering one partition then grows near-linearly with its size",
    )
    member_separation: float = Field(
        -0.02, gt=-1, lt=1,
        description="a member of a smoothed cluster stays when, on its own vector, its nearest co-members are at most "
        "this much less alike than its nearest outsiders",
    )
    duplicates_up_to: int = Field(
        2, ge=0, le=100,
        description="where a typical clustered report's first-pass cluster has at most twice this many other members, "
        "problems come in twos and threes: clusters are cliques of pair-grade reports (algorithm 4)",
    )
    pair_margin: float = Field(
        0.2, gt=-1, lt=1,
        description="… two reports are pair-grade when their cosine exceeds the mean of their local densities (mean "
        "cosine to ten near distinct reports, after the closest 2 × duplicates_up_to) by this much",
    )


class DemandConfig(Strict):
    half_life_days: float = Field(DEFAULT_HALF_LIFE_DAYS, gt=0, description="recency half-life of the ranking score")
