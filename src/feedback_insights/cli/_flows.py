"""The orchestrating commands: ``run`` (every flow once, in order) and ``serve`` (the flows on
their schedules). Both import Prefect, so only they pay for it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ._app import ConfigOption, app, load_config, out

if TYPE_CHECKING:
    from ..config import Config


def _prefect_home(cfg: Config) -> Path:
    """Prefect's state beside the warehouse (unless PREFECT_HOME says otherwise): a home
    directory that is not writable, or another Prefect's database there, is no concern."""
    home = Path(os.environ.setdefault("PREFECT_HOME", str(cfg.warehouse.path.resolve().parent / ".prefect")))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    return home


@app.command()
def run(config: ConfigOption = None) -> None:
    """Run the pipeline once: the ingest, insights, publish (when a GitHub repository is
    configured) and weekly-digest flows, in order; by default on the embedded sample."""
    cfg = load_config(config)
    _prefect_home(cfg)
    from ..drafts import list_drafts
    from ..flows import FLOWS
    from ..warehouse import Warehouse

    publishing = bool(cfg.github.repos or cfg.github.default_repo)
    cfg.check_secrets(publishing)
    path = str(config) if config else None
    ingested = FLOWS["ingest"](config=path, retries=False)
    insights = FLOWS["insights"](config=path, retries=False)
    published = FLOWS["publish"](config=path, retries=False) if publishing else "skipped (no GitHub repository configured)"
    digests = FLOWS["weekly-digest"](config=path, retries=False)
    for stage, line in (
        ("ingest", ingested["line"]), ("signals", f"scored {insights['signals']} new records"),
        ("clusters", insights["reports"]), ("goal themes", insights["goals"]), ("drafts", insights["drafts"]),
        ("publish", published),
    ):
        out.print(f"[bold]{stage}[/]: {line}", highlight=False)
    with Warehouse(cfg.warehouse.path) as warehouse:
        pending = list_drafts(warehouse, "pending").height
    for digest in digests:
        out.print(f"digest: {Path(digest).resolve()}", highlight=False)
    out.print(f"drafts: {pending} waiting for review · feedback-insights drafts list", highlight=False)
    out.print(f"warehouse: {cfg.warehouse.path.resolve()}", highlight=False)


@app.command()
def serve(config: ConfigOption = None) -> None:
    """Serve the four flows on their schedules (the flows section of the configuration) until
    interrupted. Without PREFECT_API_URL a local Prefect server is started (SQLite under
    .prefect beside the warehouse) and stopped afterwards; schedules are left active."""
    cfg = load_config(config)
    cfg.check_secrets(bool(cfg.github.repos or cfg.github.default_repo))
    home = _prefect_home(cfg)
    path = str(Path(config).resolve()) if config else None
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():  # the environment's or the active Prefect profile's
        _serve(cfg, path)
        return
    from ..flows import local_server, stop_on_signals

    with stop_on_signals(), local_server(home) as api_url:
        os.environ["PREFECT_API_URL"] = api_url
        out.print(f"Prefect server: {api_url.removesuffix('/api')} (PREFECT_HOME {home})", highlight=False)
        _serve(cfg, path)


def _serve(cfg: Config, path: str | None) -> None:
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
    try:
        prefect_serve(*deployments, pause_on_shutdown=False)
    except KeyboardInterrupt:
        pass
