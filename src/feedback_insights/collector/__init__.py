"""The collector: the server agents and services send feedback to, the pipeline pulls from, and
that answers agents with the known issues the pipeline posts back.

AFP §5.1 defines only the push side of a collector; the pull (``GET /v1/records``) and known
issue (``/v1/known-issues``) endpoints are ours and are documented in ``schemas/collector/``.
"""

from ._app import create_app
from ._auth import hash_key
from ._collector import Collector
from ._server import fit_connections, server_config
from ._store import Store

__all__ = ["Collector", "Store", "create_app", "fit_connections", "hash_key", "server_config"]
