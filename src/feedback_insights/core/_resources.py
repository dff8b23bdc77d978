"""Where the project's data folders are, installed or run from a checkout.

A wheel carries ``schemas/``, ``prompts/`` and ``data/sample`` inside the package; an editable
install (the README's setup) reads them from the repository root.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
_REPO = _PACKAGE.parents[1]


def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _REPO / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the {name!r} folder is missing from the installation")


def schemas_dir() -> Path:
    return resource_dir("schemas")


def sample_dir() -> Path:
    return resource_dir("data") / "sample"
