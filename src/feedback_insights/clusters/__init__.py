"""The clustering stage: embed reports, cluster duplicates with stable ids, count demand.

- embedding (:class:`MiniLMEmbedder`, the packaged model, with a warehouse cache);
- the algorithm (:func:`place`, :func:`cluster`: precision first, incremental);
- the stage over the warehouse (:func:`cluster_new_records`) and cluster labels;
- maintainers' corrections (merge, split, move, ignore);
- optional LLM help (:func:`cluster_assist`): problem statements, names, borderline merges;
- demand per cluster, counted by distinct accounts (:func:`demand`);
- the reports in no cluster (:func:`unclustered`), so that no reader loses them;
- the stateless file mode (:func:`cluster_inputs`), the same embedder and algorithm.
"""

from ._algorithm import Placement, assign, background, cluster, place, smooth, smoothing_reach, unit
from ._assist import (
    GREY_BAND,
    MAX_PAIRS,
    Assistant,
    Evidence,
    Judgement,
    StageAssist,
    borderline_pairs,
    cluster_centroids,
    embedded_text,
    typical,
)
from ._assist_store import ClusterAssist, cluster_assist, undo_merge
from ._backends import embedder_for, members_model, packaged
from ._confidence import RULE, ConfidenceRule, confidence
from ._corrections import (
    UNDOABLE,
    ClusterAction,
    CorrectionError,
    Moved,
    Then,
    Undone,
    default_actor,
    given_name,
    history,
    latest_action,
    merge,
    move,
    rename,
    set_ignored,
    split,
    undo,
    undoable,
)
from ._demand import demand, latest_report, weeks
from ._embedding import (
    TEXT_COMPOSITION,
    TURN_CONTEXT,
    Embedder,
    MapShards,
    MiniLMEmbedder,
    embed_with_cache,
    in_process,
    record_text,
    text_sha256,
    text_sql,
    to_matrix,
)
from ._file_mode import InputError, cluster_inputs, embed_inputs, read_inputs, write_outputs, write_vectors
from ._labels import key_terms, medoid
from ._lookup import find_records
from ._onnx import OnnxMiniLMEmbedder, exported_model
from ._rebuild import Rebuild, rebuild
from ._stage import VIEWS, ClusterRun, cluster_new_records, describe, describe_stale
from ._unclustered import unclustered, unclustered_services
from ._versions import LATEST, VERSIONS, ClusteringVersion, UnknownVersion, in_force

#: What clustering writes: vectors by text hash, the clusters and who is in them, maintainers'
#: corrections, and what an LLM said of them when one is configured (its calls as hashes only).
TABLES = frozenset({"embeddings", "clusters", "cluster_members", "cluster_actions", "cluster_names", "cluster_judgements", "cluster_llm_calls", "problem_statements"})

__all__ = [
    "TABLES",
    "undoable",
    "undo",
    "rename",
    "latest_action",
    "history",
    "given_name",
    "Undone",
    "ClusterAction",
    "UNDOABLE",
    "GREY_BAND",
    "MAX_PAIRS",
    "Assistant",
    "ClusterAssist",
    "StageAssist",
    "Evidence",
    "Judgement",
    "LATEST",
    "RULE",
    "TEXT_COMPOSITION",
    "TURN_CONTEXT",
    "VERSIONS",
    "VIEWS",
    "ClusterRun",
    "ClusteringVersion",
    "ConfidenceRule",
    "CorrectionError",
    "Embedder",
    "InputError",
    "MapShards",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "Moved",
    "Placement",
    "Rebuild",
    "Then",
    "UnknownVersion",
    "assign",
    "background",
    "borderline_pairs",
    "cluster_assist",
    "cluster_centroids",
    "cluster",
    "cluster_inputs",
    "cluster_new_records",
    "confidence",
    "default_actor",
    "demand",
    "describe",
    "describe_stale",
    "embed_inputs",
    "embed_with_cache",
    "embedder_for",
    "exported_model",
    "members_model",
    "packaged",
    "embedded_text",
    "find_records",
    "in_force",
    "in_process",
    "key_terms",
    "latest_report",
    "medoid",
    "merge",
    "move",
    "place",
    "read_inputs",
    "rebuild",
    "record_text",
    "set_ignored",
    "smooth",
    "smoothing_reach",
    "split",
    "text_sql",
    "text_sha256",
    "to_matrix",
    "typical",
    "undo_merge",
    "unclustered",
    "unclustered_services",
    "unit",
    "weeks",
    "write_outputs",
    "write_vectors",
]
