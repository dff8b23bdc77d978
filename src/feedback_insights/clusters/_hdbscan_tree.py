"""hdbscan's private tree functions, confined here and checked when this module is imported.

:func:`._algorithm._hdbscan` builds the mutual-reachability graph itself (hdbscan's sparse path
does it one entry at a time in Python) and hands hdbscan the spanning tree. The two functions
that take it from there, ``label`` (the single-linkage tree) and ``_tree_to_labels`` (the
cluster tree and its selection), are not hdbscan's public API, so ``pyproject.toml`` pins
``hdbscan<0.9`` and this module fails with one clear message if a release moves them.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import numpy as np

_EXPECTED = ("X", "single_linkage_tree", "min_cluster_size", "cluster_selection_method", "allow_single_cluster")

try:
    from hdbscan._hdbscan_linkage import label
    from hdbscan.hdbscan_ import _tree_to_labels
except ImportError as exc:
    raise ImportError(
        f"hdbscan {version('hdbscan')} no longer has the tree functions feedback-insights uses "
        f"({exc}); install hdbscan>=0.8.40,<0.9"
    ) from None

if tuple(inspect.signature(_tree_to_labels).parameters)[: len(_EXPECTED)] != _EXPECTED:
    raise ImportError(
        f"hdbscan {version('hdbscan')} changed _tree_to_labels{inspect.signature(_tree_to_labels)}; "
        "install hdbscan>=0.8.40,<0.9"
    )

__all__ = ["label", "tree_to_labels"]


def tree_to_labels(edges: np.ndarray, min_cluster_size: int, allow_single_cluster: bool) -> np.ndarray:
    """Cluster labels (-1 for noise) of the minimum spanning tree ``edges`` (rows of
    ``[i, j, weight]`` sorted by weight), excess-of-mass selection, as ``hdbscan.HDBSCAN``."""
    return _tree_to_labels(None, label(edges), min_cluster_size, "eom", allow_single_cluster)[0]
