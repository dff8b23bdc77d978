"""The ``desk`` command: the review desk, a web application over the warehouse."""

from __future__ import annotations

from typing import Annotated

import typer

from ._app import ConfigOption, UserError, app, err, load_config


@app.command()
def desk(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(
        "--host", help="Address to listen on (default: desk.host in the configuration, 127.0.0.1). Any other than "
                       "loopback needs a login token in $FEEDBACK_INSIGHTS_DESK_TOKEN.")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", min=1, max=65535, help="Port (default: desk.port in the configuration, 8790).")] = None,
) -> None:
    """Serve the review desk: the drafts to decide, the clusters to correct and every week's
    digest, in a browser. Stop it with Ctrl-C.

    Example: feedback-insights desk, then open http://127.0.0.1:8790/
    """
    from ..desk import DeskRefused, serve

    cfg = load_config(config)
    try:
        serve(cfg, host or cfg.desk.host, port or cfg.desk.port,
              on_ready=lambda url: err.print(f"desk: {url} (Ctrl-C stops it)", highlight=False, markup=False),
              on_warning=lambda line: err.print(f"desk: warning: {line}", highlight=False, markup=False,
                                                soft_wrap=True))
    except DeskRefused as exc:
        raise UserError(str(exc)) from None
