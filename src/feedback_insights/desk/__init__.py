"""The review desk: a small web application over the warehouse for the people who review.

Drafts (the queue, each draft as GitHub will show it beside its evidence and history; edit,
approve, reject), clusters (the demand table; merge, split, move, ignore) and every week's
digest, as server-rendered HTML forms that work without JavaScript. Every action is the
library function the CLI calls, recorded with the reviewer's name.

It binds 127.0.0.1 unless told otherwise; elsewhere it needs a token (:mod:`._security`), and
it takes turns with the scheduled flows on the warehouse (:mod:`._store`).
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Callable

from ..config import Config
from ._app import Desk, create_app
from ._security import MAX_SESSIONS, MIN_TOKEN, DeskRefused, Sessions, is_loopback

__all__ = ["MAX_SESSIONS", "MIN_TOKEN", "Desk", "DeskRefused", "Sessions", "create_app", "is_loopback", "serve"]

#: What to do about the usual reasons a port cannot be listened on.
_HINTS = {errno.EADDRINUSE: " (is another desk running? choose another --port)",
          errno.EADDRNOTAVAIL: " (--host must be an address of this machine)"}


def serve(config: Config, host: str, port: int, on_ready: Callable[[str], None] | None = None,
          on_warning: Callable[[str], None] | None = None) -> None:
    """Serve the desk until interrupted; refuses an address other than loopback without
    ``[desk] token_env`` set, since anyone who can reach it could otherwise decide, and a port
    it cannot listen on (:class:`DeskRefused`, before anything is announced). ``on_ready`` is
    told the desk's address once it listens; ``on_warning`` what its operator should know."""
    import uvicorn

    token = config.desk.token()
    app = create_app(config, host, token)
    listening = _listen(host, port)
    if token is not None and not is_loopback(host) and on_warning:
        on_warning(f"the desk serves plain HTTP on {host}: the token and the session cookie cross the network "
                   "unencrypted; put it behind a TLS proxy (https) before anyone logs in from another machine")
    if on_ready:
        on_ready(f"http://{f'[{host}]' if ':' in host else host}:{port}/")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", server_header=False, access_log=False))
    with listening, contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl-C again once it has stopped
        server.run(sockets=[listening])


def _listen(host: str, port: int) -> socket.socket:
    """The desk's socket, bound now so that a port in use is one clear line, not uvicorn's
    error after the address was announced."""
    address = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
        sock.bind((address, port))
        sock.listen()
    except OSError as exc:  # a port in use, an address not this machine's, a name that does not resolve
        sock.close()
        raise DeskRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}{_HINTS.get(exc.errno or 0, '')}") from None
    return sock
