"""The orchestrating commands: ``run`` (every flow once, in order) and ``serve`` (the flows on
their schedules). Both import Prefect, so only they pay for it.

Both are quiet: Prefect's console logs are at WARNING unless ``--verbose`` (see the root
callback), and what happened is said once, in the command's own summary lines.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer
from rich.markup import escape

from ._app import ConfigOption, UserError, app, err, load_config, open_warehouse, out

if TYPE_CHECKING:
    from ..config import Config


def _prefect_home(cfg: Config) -> Path:
    """Prefect's state beside the warehouse (unless PREFECT_HOME says otherwise): a home
    directory that is not writable, or another Prefect's database there, is no concern. A
    temporary server on a fresh home migrates its database first, which on a loaded 2-core
    machine took longer than Prefect's default 20 s wait: ``run`` failed before ingesting."""
    home = Path(os.environ.setdefault("PREFECT_HOME", str(cfg.warehouse.path.resolve().parent / ".prefect")))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    return home


@app.command()
def run(config: ConfigOption = None) -> None:
    """Run the pipeline once: the ingest, insights, publish (when a GitHub repository is
    configured) and weekly-digest flows, in order; by default on the embedded sample. A flow
    that fails does not stop the others: its summary is printed as far as it got, then one
    line says what failed, and the exit code is 1 (2 for a configuration error, which stops
    the flows after it)."""
    cfg = load_config(config)
    _prefect_home(cfg)
    from ..config import ConfigError
    from ..drafts import list_drafts

    publishing = bool(cfg.github.repos or cfg.github.default_repo)
    cfg.check_secrets(publishing)
    parameters = {"config": str(config) if config else None, "retries": False}
    failures: list[str] = []
    done: dict[str, Any] = {}
    stopped: ConfigError | None = None
    with _failures_said_once():
        for name in ("ingest", "insights", "publish", "weekly-digest"):
            if name == "publish" and not publishing:
                done[name] = "skipped (no GitHub repository configured)"
                continue
            try:
                done[name] = _flow(name, failures, **parameters)
            except ConfigError as exc:  # every flow after would meet it too
                stopped = exc
                break
    ingested, insights = done.get("ingest") or {}, done.get("insights") or {}
    published, digests = done.get("publish"), done.get("weekly-digest") or []
    scored = insights.get("signals")
    for stage, line in (
        ("ingest", ingested.get("line")), ("signals", None if scored is None else f"scored {scored} new records"),
        ("clusters", insights.get("reports")), ("goal themes", insights.get("goals")), ("drafts", insights.get("drafts")),
        ("publish", published),
    ):
        if line is not None:
            out.print(f"[bold]{stage}[/]: {escape(line)}", highlight=False)
    with open_warehouse(cfg) as warehouse:
        pending = list_drafts(warehouse, "pending").height
    for digest in digests:
        out.print(f"digest: {Path(digest).resolve()}", highlight=False, markup=False)
    out.print(f"drafts: {pending} waiting for review · feedback-insights drafts list", highlight=False)
    out.print(f"warehouse: {cfg.warehouse.path.resolve()}", highlight=False, markup=False)
    for failure in failures:
        err.print(f"[red]error[/]: {escape(failure)}", highlight=False)
    if stopped is not None:
        raise stopped
    if failures:
        raise typer.Exit(1)


def _flow(name: str, failures: list[str], **parameters: Any) -> Any:
    """Run the flow ``name``: what it returned; or, when it failed, what it did before it failed
    (None when nothing), with one line in ``failures`` saying what failed. A configuration
    error is raised."""
    from ..config import ConfigError
    from ..flows import FLOWS, StageFailed

    state = FLOWS[name](**parameters, return_state=True)
    if state.is_completed():
        return state.result()
    error = state.result(raise_on_failure=False)
    if isinstance(error, ConfigError):
        raise error
    if isinstance(error, StageFailed):
        failures.append(f"{name}: {error}")
        return error.done
    failures.append(f"{name}: {type(error).__name__}: {error}" if isinstance(error, BaseException)
                    else f"{name}: {state.message or state.name}")
    return None


@contextmanager
def _failures_said_once() -> Iterator[None]:
    """Keep Prefect's own failure reports off the console: a failed task and its flow each log
    an error with a traceback, and ``run`` says what failed itself, in one line. The Prefect
    API (the UI's run pages) still gets them, and ``--verbose`` shows them."""
    context = click.get_current_context(silent=True)
    if context is not None and context.find_root().params.get("verbose"):
        yield
        return
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()  # Prefect makes its console handler on first use: the filter goes on that one
    told = _ToldByRun()
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
    for handler in handlers:
        handler.addFilter(told)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(told)


class _ToldByRun(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.name.startswith("prefect"))


@app.command()
def serve(config: ConfigOption = None) -> None:
    """Serve the four flows on their schedules (the flows section of the configuration) until
    interrupted. Without PREFECT_API_URL one local Prefect server is started (SQLite under
    .prefect beside the warehouse) and stopped afterwards; schedules are left active. If that
    server dies, serve stops too and says so (exit 2)."""
    cfg = load_config(config)
    cfg.check_secrets(bool(cfg.github.repos or cfg.github.default_repo))
    home = _prefect_home(cfg)
    path = str(Path(config).resolve()) if config else None
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ..flows import interrupted_if_gone, local_server, stop_on_signals

    if PREFECT_API_URL.value():  # the environment's or the active Prefect profile's
        with stop_on_signals():
            _serve(cfg, path, PREFECT_API_URL.value(), None)
        return

    def report(line: str) -> None:
        err.print(f"[red]error[/]: {escape(line)}", highlight=False)

    with stop_on_signals(), local_server(home) as server:
        # This process's Prefect client and the flow runs it starts both talk to this server:
        # without the setting Prefect would start a second, temporary one for the deployments.
        os.environ["PREFECT_API_URL"] = server.api_url
        with temporary_settings({PREFECT_API_URL: server.api_url}), interrupted_if_gone(server, report):
            out.print(f"Prefect server: {server.url} (PREFECT_HOME {home})", highlight=False, markup=False)
            _serve(cfg, path, server.api_url, server.api_url)
    if server.lost:
        raise UserError(server.failure())


def _serve(cfg: Config, path: str | None, api_url: str, hint_url: str | None) -> None:
    """Serve the deployments until interrupted, having said how to trigger one by hand;
    ``hint_url`` is the API the hint must name (None: the user's own setting already does)."""
    from prefect import serve as prefect_serve
    from prefect.deployments.runner import EntrypointType

    from ..flows import FLOWS, schedule

    deployments = [
        flow.to_deployment(
            name=name, schedules=[schedule(cfg.flows, name)], parameters={"config": path},
            entrypoint_type=EntrypointType.MODULE_PATH,  # the installed package, not a file path
        )
        for name, flow in FLOWS.items()
    ]
    names = [f"{flow.name}/{name}" for name, flow in FLOWS.items()]
    out.print(f"serving {', '.join(names)} on {api_url} until interrupted (Ctrl-C)", highlight=False, markup=False)
    prefix = f"PREFECT_API_URL={shlex.quote(hint_url)} " if hint_url else ""
    out.print(f"trigger a run now: {prefix}{_prefect_command()} deployment run {names[0]}", highlight=False, markup=False)
    prefect_serve(*deployments, pause_on_shutdown=False, print_starting_message=False)


def _prefect_command() -> str:
    """How to run this environment's ``prefect`` from a shell: by name when the shell finds
    this one, else by its path (a virtualenv that is not activated)."""
    mine = Path(sys.executable).with_name("prefect")
    found = shutil.which("prefect")
    if found and mine.exists() and Path(found).resolve() == mine.resolve():
        return "prefect"
    if mine.exists():
        return shlex.quote(str(mine))
    return f"{shlex.quote(sys.executable)} -m prefect"
