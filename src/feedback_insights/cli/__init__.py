"""The ``feedback-insights`` command: a thin shell over the library.

One module per command group, each adding its commands to the root app of :mod:`._app`; none
imports another. Errors are one line; ``--debug`` shows the trace.
"""

from __future__ import annotations

import sys

from rich.markup import escape

from ._app import UserError, app, err

# Each module adds its commands to ``app``, in this order: the order data flows, which is the
# order ``--help`` lists them in.
# isort: off
from . import _files, _ingest, _records, _clusters, _embed, _drafts, _publish, _digest, _flows  # noqa: F401, E402
from . import _collector, _warehouse, _desk  # noqa: F401, E402
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point: typer reports usage errors itself; ours become one line."""
    try:
        app()
    except Exception as exc:
        if "--debug" in sys.argv[1:]:
            raise
        from ..config import ConfigError

        known = (UserError, ConfigError, FileNotFoundError, FileExistsError, PermissionError)
        message = str(exc) if isinstance(exc, known) else f"{type(exc).__name__}: {exc}"
        err.print(f"[red]error[/]: {escape(message)}", highlight=False)
        sys.exit(2)
