"""How the desk is served: uvicorn on a socket bound first (so that a port in use is one clear
line), with the bounded protocol the collector is served with (:mod:`feedback_insights.core.serving`):
deadlines for the head and the body, a head size cap, and a connection cap fitted to the
descriptor limit. Stalled sockets (any web page can open them to 127.0.0.1) are cut off or make
room, and never starve a reviewer's requests."""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from ..config import Config, DeskConfig
from ..core.serving import BoundedProtocol, bounded, fit_connections, listen
from ._app import create_app
from ._security import DeskRefused, is_loopback

#: What to do about the usual reasons a port cannot be listened on.
_HINTS = {errno.EADDRINUSE: " (is another desk running? choose another --port)",
          errno.EADDRNOTAVAIL: " (--host must be an address of this machine)"}


def serve(config: Config, host: str, port: int, on_ready: Callable[[str], None] | None = None,
          on_warning: Callable[[str], None] | None = None) -> None:
    """Serve the desk until interrupted; refuses an address other than loopback without
    ``[desk] token_env`` set, since anyone who can reach it could otherwise decide, and a port
    it cannot listen on (:class:`DeskRefused`, before anything is announced). ``on_ready`` is
    told the desk's address once it listens; ``on_warning`` what its operator should know."""
    token = config.desk.token()
    app = create_app(config, host, token)
    listening = _listen(host, port)
    settings = config.desk
    connections = fit_connections(settings.max_connections)
    if connections < settings.max_connections:
        settings = settings.model_copy(update={"max_connections": connections})
        if on_warning:
            on_warning(f"max_connections lowered to {connections}: the descriptor limit (ulimit -n) allows no more")
    if token is not None and not is_loopback(host) and on_warning:
        on_warning(f"the desk serves plain HTTP on {host}: the token and the session cookie cross the network "
                   "unencrypted; put it behind a TLS proxy (https) before anyone logs in from another machine")
    if on_ready:
        on_ready(f"http://{f'[{host}]' if ':' in host else host}:{port}/")
    server = uvicorn.Server(server_config(app, settings))
    with listening, contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl-C again once it has stopped
        server.run(sockets=[listening])


def server_config(app: FastAPI, settings: DeskConfig) -> uvicorn.Config:
    """uvicorn as the desk runs it (on a socket of its own): the bounded protocol with the
    limits of ``[desk]``, no websockets, no server header and no access log."""
    return uvicorn.Config(app, http=bounded_protocol(settings), ws="none", log_level="warning",
                          server_header=False, access_log=False)


def bounded_protocol(settings: DeskConfig) -> type[BoundedProtocol]:
    """The bounded protocol with the limits of ``[desk]`` (its answers are plain text)."""
    return bounded(BoundedProtocol, "DeskProtocol", settings.header_timeout, settings.body_timeout,
                   settings.max_connections)


def _listen(host: str, port: int) -> socket.socket:
    """The desk's socket, bound now so that a port in use is one clear line, not uvicorn's
    error after the address was announced."""
    try:
        return listen(host, port)
    except OSError as exc:  # a port in use, an address not this machine's, a name that does not resolve
        raise DeskRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}{_HINTS.get(exc.errno or 0, '')}") from None
