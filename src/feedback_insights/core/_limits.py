"""Limits every entry point shares, defined once, and the checks that apply them before any
recursive work is done on a body."""

from __future__ import annotations

from typing import Any

from ._problems import Problem, join_path

#: The body size limit of a report, in bytes: AFP's (§3) default. Configuration may only raise it.
DEFAULT_MAX_BYTES = 16_384
#: How deeply objects and arrays may nest in a report. Real feedback nests a handful of levels;
#: anything near this limit is an attack on whatever walks it recursively.
MAX_DEPTH = 64


def depth_problem(value: Any, limit: int = MAX_DEPTH, level: int = 1) -> Problem | None:
    """A problem at the path of the first object or array nested deeper than ``limit`` levels,
    or None. ``value`` sits at ``level`` (1: the report itself; a JSON text kept in one of its
    fields starts one deeper). Iterative: no input can exhaust the stack here.

    Every report is checked, so the walk visits containers only and builds no path; the path is
    traced only for the rare report that is too deep."""
    stack = [(value, level)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return Problem(_path_below(value, level, limit), f"nests deeper than {limit} levels")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return None


def _path_below(value: Any, level: int, limit: int) -> str:
    """The dotted path of the first container found deeper than ``limit``."""
    stack: list[tuple[Any, str, int]] = [(value, "", level)]
    while stack:
        node, path, depth = stack.pop()
        if depth > limit:
            return path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((child, join_path(path, key), depth + 1) for key, child in items if isinstance(child, dict | list))
    return ""
