"""The collector server's commands: ``collector serve`` and ``collector hash-key``."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from ._app import ConfigOption, UserError, app, example, load_config, out

collector_app = typer.Typer(
    no_args_is_help=True,
    help="The collector server agents and services send feedback to.",
    epilog=example("collector hash-key \"$AGENT_KEY\"", "collector serve --port 8787"),
)
app.add_typer(collector_app, name="collector")


@collector_app.command("serve")
def collector_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8787,
    db: Annotated[Path | None, typer.Option(help="SQLite file (default: [collector] db).")] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the collector API (OpenAPI at /docs and /openapi.json)."""
    import logging

    import uvicorn

    from ..collector import Collector, Store, create_app, fit_connections, server_config
    from ..config import ENV_HMAC_KEY, embedded_default
    from ..privacy import Pseudonymiser

    cfg = load_config(config)
    if cfg == embedded_default() and not os.environ.get(ENV_HMAC_KEY):
        # The sample's key is published: real customers' accounts need a key of their own.
        raise UserError(f"the collector pseudonymises real accounts: set {ENV_HMAC_KEY} (or give a --config)")
    settings = cfg.collector if db is None else cfg.collector.model_copy(update={"db": db})
    connections = fit_connections(settings.max_connections)
    if connections < settings.max_connections:
        out.print(f"max_connections lowered to {connections}: the descriptor limit (ulimit -n) allows no more",
                  highlight=False)
        settings = settings.model_copy(update={"max_connections": connections})
    listening = _listen(host, port)
    with listening, contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl-C again once it has stopped
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        collector = Collector(settings, Pseudonymiser(cfg.privacy.key()), Store(settings.db), cfg.embedding)
        out.print(f"collector on http://{host}:{port}  ·  store {settings.db}  ·  auth {settings.auth}", highlight=False)
        uvicorn.Server(server_config(create_app(collector), settings, host, port)).run(sockets=[listening])


def _listen(host: str, port: int) -> socket.socket:
    """The collector's socket, bound before the address is announced: a port in use is one
    line (exit 2), not the success line followed by uvicorn's error."""
    from ..core.serving import listen

    try:
        return listen(host, port)
    except OSError as exc:  # a port in use, an address not this machine's, a name that does not resolve
        hint = {errno.EADDRINUSE: " (is another collector running? choose another --port)",
                errno.EADDRNOTAVAIL: " (--host must be an address of this machine)"}.get(exc.errno or 0, "")
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None


@collector_app.command("hash-key")
def collector_hash_key(key: Annotated[str, typer.Argument(help="The key to write in the configuration.")]) -> None:
    """Print how a key is written in [collector] (keys are stored hashed)."""
    from ..collector import hash_key

    out.print(hash_key(key), highlight=False)
