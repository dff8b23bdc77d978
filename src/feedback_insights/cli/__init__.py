"""The ``feedback-insights`` command: a thin shell over the library.

One module per command group, each adding its commands to the root app of :mod:`._app`; none
imports another. Every error is one line that starts with ``error:`` (``--debug`` shows the
trace), and its exit status says what kind it is (README, "Exit status"):

- 0: done;
- 1: the command ran and says no: what it was asked for does not exist, a rule of the data
  refused it, or some of its input or work failed (``validate``, ``publish``);
- 2: it could not run as asked: a usage error (an unknown option, a bad value, a missing
  argument), a configuration that does not load or lacks a secret, a busy warehouse or port,
  a service it needs that failed;
- 3: an unexpected failure (a bug): the exception's type and message.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.markup import escape

from ._app import Refused, UserError, app, err

# Each module adds its commands to ``app``, in this order: the order data flows, which is the
# order ``--help`` lists them in.
# isort: off
from . import _files, _ingest, _records, _clusters, _embed, _drafts, _publish, _digest, _flows  # noqa: F401, E402
from . import _collector, _warehouse, _desk  # noqa: F401, E402
# isort: on

__all__ = ["Refused", "UserError", "app", "main", "run"]

#: The exit status of an unexpected failure.
CRASHED = 3


def main() -> None:
    """Console entry point."""
    sys.exit(run(sys.argv[1:]))


def run(args: Sequence[str]) -> int:
    """Run the command line ``args`` and return its exit status, having printed any error as
    one line (click's usage errors too, which it would print as three)."""
    import click
    import typer

    # Typer 0.2x raises its own copy of click's errors; an older typer, click's.
    usage_errors: tuple[type[click.ClickException | typer.TyperException], ...] = (
        click.ClickException, *([typer.TyperException] if hasattr(typer, "TyperException") else []))
    try:
        status = typer.main.get_command(app).main(args=list(args), prog_name="feedback-insights", standalone_mode=False)
    except usage_errors as exc:
        context = getattr(exc, "ctx", None)
        if context is not None and exc.format_message() == context.get_help():  # a bare group: its help
            typer.echo(exc.format_message())
            return 0
        where = f" (see {context.command_path} --help)" if context is not None else ""
        return _error(_sentence(exc.format_message()) + where, 2)
    except (click.Abort, typer.Abort):
        return _error("aborted", 130)
    except Exception as exc:
        if "--debug" in args:
            raise
        from ..config import ConfigError

        if isinstance(exc, UserError):
            return _error(str(exc), exc.status)
        if isinstance(exc, (ConfigError, FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError)):
            return _error(str(exc), 2)
        return _error(f"{type(exc).__name__}: {exc}", CRASHED)
    return status if isinstance(status, int) else 0


def _error(message: str, status: int) -> int:
    err.print(f"[red]error[/]: {escape(message)}", highlight=False)
    return status


def _sentence(message: str) -> str:
    """click's message as the other errors read: lower case, no closing full stop."""
    message = message.strip().rstrip(".")
    return message[:1].lower() + message[1:]
