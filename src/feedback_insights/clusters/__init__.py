"""The clustering stage: embed reports, cluster duplicates with stable ids, count demand.

- embedding (:class:`MiniLMEmbedder`, the packaged model, with a warehouse cache);
- the algorithm (:func:`place`, :func:`cluster`: precision first, incremental);
- the stage over the warehouse (:func:`cluster_new_records`) and cluster labels;
- maintainers' corrections (merge, split, ignore);
- demand per cluster, counted by distinct accounts (:func:`demand`);
- the stateless file mode (:func:`cluster_inputs`), the same embedder and algorithm.
"""

from ._algorithm import Placement, assign, background, cluster, place, smooth, smoothing_reach, unit
from ._corrections import CorrectionError, default_actor, merge, set_ignored, split
from ._demand import demand, latest_report
from ._embedding import (
    TEXT_COMPOSITION,
    Embedder,
    MapShards,
    MiniLMEmbedder,
    embed_with_cache,
    in_process,
    record_text,
    text_sha256,
    to_matrix,
)
from ._file_mode import InputError, cluster_inputs, read_inputs, write_outputs
from ._labels import key_terms, medoid
from ._lookup import find_records
from ._stage import VIEWS, ClusterRun, cluster_new_records, describe, describe_stale, text_sql

__all__ = [
    "TEXT_COMPOSITION",
    "VIEWS",
    "ClusterRun",
    "CorrectionError",
    "Embedder",
    "InputError",
    "MapShards",
    "MiniLMEmbedder",
    "Placement",
    "assign",
    "background",
    "cluster",
    "cluster_inputs",
    "cluster_new_records",
    "default_actor",
    "demand",
    "describe",
    "describe_stale",
    "embed_with_cache",
    "find_records",
    "in_process",
    "key_terms",
    "latest_report",
    "medoid",
    "merge",
    "place",
    "read_inputs",
    "record_text",
    "set_ignored",
    "smooth",
    "smoothing_reach",
    "split",
    "text_sql",
    "text_sha256",
    "to_matrix",
    "unit",
    "write_outputs",
]
