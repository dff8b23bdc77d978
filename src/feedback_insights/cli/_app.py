"""The root command and what every command group shares: the consoles, the options, the
one-line error, and opening the configured warehouse.

Heavy modules (DuckDB, Polars, the embedding model, Prefect) are imported inside the commands
that need them, so ``--help`` stays instant.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from ..config import Config
    from ..warehouse import Warehouse


def example(*commands: str) -> str:
    """A command group's "Example:" epilog, its lines kept as written (click rewraps
    paragraphs unless they start with ``\\b``)."""
    return "Example:\n\n\b\n" + "\n".join(f"  feedback-insights {c}" for c in commands)


app = typer.Typer(
    help="Turn feedback filed by AI agents into clustered demand, drafted issues and known_issue updates.",
    epilog=example("run", "drafts list", "drafts approve 3 --by maria", "publish --dry-run"),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich markup would swallow the [llm] and [digest] the help names, and
    # typer's rich panels show flags as "<bool>". Sub-apps inherit the mode.
    rich_markup_mode=None,
)

# No emoji codes: report text is printed through these, and rich would turn the
# ":email:" of "[REDACTED:email:1]" into a picture of an envelope.
err = Console(stderr=True, soft_wrap=True, emoji=False)
out = Console(emoji=False)
# A terminal gets lines wrapped at its width; a pipe or a log gets each line whole (rich
# would otherwise cut it at 80 columns, mid-path). Tables and Markdown, which lay themselves
# out in the width, are printed with soft_wrap=False.
out.soft_wrap = not out.is_terminal

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML configuration (default: $FEEDBACK_INSIGHTS_CONFIG, ./feedback-insights.toml, or the embedded sample)."),
]
ByOption = Annotated[str | None, typer.Option("--by", help="Who is acting (default: $FEEDBACK_INSIGHTS_USER or login).")]
ReasonOption = Annotated[str | None, typer.Option("--reason", help="Why, kept with the action.")]
#: The stateless file commands' input (``cluster``, ``embed``): any file every command reads.
InputFileOption = Annotated[Path, typer.Option(
    "--input", "-i", exists=True, dir_okay=False,
    help="JSON Lines, a JSON array or Parquet: canonical records or {id, text} objects.")]
TextFieldOption = Annotated[str, typer.Option(
    "--text-field", help="Field holding the text (absent: compose from canonical fields).")]
IdFieldOption = Annotated[str, typer.Option("--id-field", help="Field holding the id.")]

T = TypeVar("T")


class UserError(Exception):
    """A command that cannot run as asked: a wrong option or value, a configuration that does
    not load, a missing secret, a busy warehouse or port. One line, exit status 2."""

    status = 2


class Refused(UserError):
    """A command that ran and says no: what it was asked for does not exist, or a rule of the
    data refuses it (a draft already approved, a merge across services, an input file with a
    bad line). One line, exit status 1."""

    status = 1


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show stack traces on errors.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's INFO logs (run, serve).")] = False,
) -> None:
    """Declares the global options. ``--debug`` is acted on by :func:`feedback_insights.cli.main`,
    which must know it before any command runs (to decide whether a failure prints one line or
    the trace). Without ``--verbose`` Prefect's console handler shows warnings and errors only:
    its INFO lines repeat what the commands' summaries say. Its logs to the Prefect API (the
    UI's flow-run pages) keep every level. Set here, before any command imports Prefect, and
    inherited by the flow runs ``serve`` starts."""
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")


def refuse_without_text(path: Path, inputs: int, texts: int, text_field: str) -> None:
    """The file commands (``embed``, ``cluster``) on a file none of whose inputs has text (a
    wire dialect's records, not normalised): one line saying so, rather than an output of
    nothing but nulls."""
    if inputs and not texts:
        raise Refused(f"{path}: none of its {inputs} inputs has text to embed: none has a non-blank {text_field!r} "
                      "field or is a canonical record with words enough to compose one. Records in a wire dialect "
                      "(AFP, AFS, …) are normalised first (feedback-insights normalise -i FILE -o records.jsonl); "
                      "--text-field names another field")


def load_config(path: Path | None) -> Config:
    from ..config import load

    return load(path)


def in_warehouse(cfg: Config, action: Callable[[Warehouse], T], *refusals: type[Exception]) -> T:
    """``action(warehouse)`` on the configured warehouse; a refusal (an unknown id, a rule of
    the data) becomes one line and exit status 1 (:class:`Refused`)."""
    with open_warehouse(cfg) as warehouse:
        try:
            return action(warehouse)
        except refusals as exc:
            raise Refused(str(exc)) from None


@contextmanager
def open_warehouse(cfg: Config) -> Iterator[Warehouse]:
    """The configured warehouse, once the flow or command working on it is done: a person's
    command waits its turn (up to ``[warehouse] lock_wait`` seconds, saying once what it waits
    for) instead of failing on DuckDB's lock, and holds the lock for its own work."""
    from ..warehouse import WarehouseBusy, open_when_free

    try:
        with open_when_free(cfg.warehouse.path, _command(), cfg.warehouse.lock_wait, _waiting(cfg)) as warehouse:
            yield warehouse
    except WarehouseBusy as exc:
        raise UserError(f"{exc} ([warehouse] lock_wait sets how long to wait)") from None


@contextmanager
def warehouse_turn(cfg: Config) -> Iterator[None]:
    """The warehouse's lock alone (as :func:`open_warehouse` takes it), for library calls that
    open the file themselves (publishing, the digest, Parquet export)."""
    from ..warehouse import WarehouseBusy, exclusive

    try:
        with exclusive(cfg.warehouse.path, _command(), cfg.warehouse.lock_wait, _waiting(cfg)):
            yield
    except WarehouseBusy as exc:
        raise UserError(f"{exc} ([warehouse] lock_wait sets how long to wait)") from None


def _waiting(cfg: Config) -> Callable[[str], None]:
    def say(holder: str) -> None:
        err.print(f"waiting for {escape(holder)} to finish with the warehouse… (up to {cfg.warehouse.lock_wait:g} s)",
                  highlight=False)

    return say


def current_context() -> Any:
    """The running command's click context (None outside a command). Typer 0.2x runs on a
    copy of click of its own, whose context the installed click's ``get_current_context``
    does not see: it answered None."""
    try:
        from typer._click import globals as contexts
    except ImportError:  # a typer on the installed click
        import click as contexts  # type: ignore[no-redef]
    return contexts.get_current_context(silent=True)


def _command() -> str:
    """This command as the lock file names it to whoever waits: ``feedback-insights drafts approve``."""
    context = current_context()
    words = context.command_path.split()[1:] if context else []
    return " ".join(["feedback-insights", *words])


def actor(by: str | None) -> str:
    """Who a maintainer's action is recorded as."""
    from ..clusters import default_actor

    return by or default_actor()
