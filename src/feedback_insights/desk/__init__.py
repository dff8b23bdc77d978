"""The review desk: a small web application over the warehouse for the people who review.

Drafts (the queue, each draft as GitHub will show it beside its evidence and history; edit,
approve, reject), clusters (the demand table; merge, split, move, ignore) and every week's
digest, as server-rendered HTML forms that work without JavaScript. Every action is the
library function the CLI calls, recorded with the reviewer's name.

It binds 127.0.0.1 unless told otherwise; elsewhere it needs a token (:mod:`._security`); it
takes turns with the scheduled flows on the warehouse (:mod:`._store`); and it is served with
bounds on slow and stalled clients (:mod:`._server`).
"""

from __future__ import annotations

from ._app import Desk, create_app
from ._security import MAX_SESSIONS, MIN_TOKEN, DeskRefused, Sessions, is_loopback
from ._server import serve, server_config

__all__ = ["MAX_SESSIONS", "MIN_TOKEN", "Desk", "DeskRefused", "Sessions", "create_app", "is_loopback", "serve",
           "server_config"]
