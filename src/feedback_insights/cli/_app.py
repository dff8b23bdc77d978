"""The root command and what every command group shares: the consoles, the options, the
one-line error, and opening the configured warehouse.

Heavy modules (DuckDB, Polars, the embedding model, Prefect) are imported inside the commands
that need them, so ``--help`` stays instant.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:
    from ..config import Config
    from ..warehouse import Warehouse

app = typer.Typer(
    help="Turn feedback filed by AI agents into clustered demand, drafted issues and known_issue updates.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

err = Console(stderr=True, soft_wrap=True)
out = Console()

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML configuration (default: $FEEDBACK_INSIGHTS_CONFIG, ./feedback-insights.toml, or the embedded sample)."),
]
ByOption = Annotated[str | None, typer.Option("--by", help="Who is acting (default: $FEEDBACK_INSIGHTS_USER or login).")]
ReasonOption = Annotated[str | None, typer.Option("--reason", help="Why, kept with the action.")]

T = TypeVar("T")


class UserError(Exception):
    """A failure the user can fix; printed as one line."""


@app.callback()
def _root(debug: Annotated[bool, typer.Option("--debug", help="Show stack traces on errors.")] = False) -> None:
    """Declares the global options. ``--debug`` is acted on by :func:`feedback_insights.cli.main`,
    which must know it before any command runs (to decide whether a failure prints one line or
    the trace)."""


def load_config(path: Path | None) -> Config:
    from ..config import load

    return load(path)


def in_warehouse(cfg: Config, action: Callable[[Warehouse], T], *refusals: type[Exception]) -> T:
    """``action(warehouse)`` on the configured warehouse; a refusal (an error the user can fix,
    e.g. an unknown id) becomes one line."""
    from ..warehouse import Warehouse

    with Warehouse(cfg.warehouse.path) as warehouse:
        try:
            return action(warehouse)
        except refusals as exc:
            raise UserError(str(exc)) from None


def actor(by: str | None) -> str:
    """Who a maintainer's action is recorded as."""
    from ..clusters import default_actor

    return by or default_actor()
