"""feedback-insights: agent feedback in, clustered demand and drafted fixes out.

One package per pipeline stage, in the order data flows: :mod:`.ingest` (with :mod:`.privacy`),
:mod:`.signals`, :mod:`.clusters`, :mod:`.drafts`, :mod:`.publish`, :mod:`.digest`; around them
:mod:`.core`, :mod:`.config`, :mod:`.warehouse`, the :mod:`.collector` server, the Prefect
:mod:`.flows` and the :mod:`.cli`. Everything here is loaded on first use (PEP 562), so
``import feedback_insights`` costs nothing and ``feedback-insights --help`` stays instant::

    import feedback_insights as fi

    config = fi.load_config()            # or fi.embedded_default()
    with fi.Warehouse(config.warehouse.path) as warehouse:
        fi.ingest.ingest(config, warehouse)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The stage packages, importable as attributes.
STAGES = ("core", "config", "llm", "ingest", "privacy", "warehouse", "signals", "clusters", "drafts", "publish", "digest",
          "collector", "flows", "cli")
#: The names most scripts start from: name → the package that defines it (and its name there).
_NAMES = {
    "Config": ("config", "Config"),
    "ConfigError": ("config", "ConfigError"),
    "load_config": ("config", "load"),
    "embedded_default": ("config", "embedded_default"),
    "Warehouse": ("warehouse", "Warehouse"),
}

__all__ = [  # the names above, spelled out for static tools
    "STAGES", "Config", "ConfigError", "Warehouse", "__version__", "cli", "clusters", "collector", "config", "core",
    "digest", "drafts", "embedded_default", "flows", "ingest", "llm", "load_config", "privacy", "publish", "signals",
    "warehouse",
]

if TYPE_CHECKING:
    from .config import Config as Config
    from .config import ConfigError as ConfigError
    from .config import embedded_default as embedded_default
    from .config import load as load_config
    from .warehouse import Warehouse as Warehouse


def __getattr__(name: str) -> Any:
    if name in STAGES:
        return importlib.import_module(f".{name}", __name__)
    if name in _NAMES:
        package, attribute = _NAMES[name]
        return getattr(importlib.import_module(f".{package}", __name__), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
