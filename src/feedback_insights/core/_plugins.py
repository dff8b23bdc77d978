"""The extension seam: sources, dialects and sinks found by entry point, or registered in code.

A plugin is one object under a name in a group. Installed packages declare theirs as entry
points (``[project.entry-points."feedback_insights.sources"]`` and so on); this package's
built-ins are declared the same way in its ``pyproject.toml``. Code that cannot be installed (a
test, a notebook) calls :meth:`Registry.register`; that registration holds in its own process
only, so a dialect registered in code is unknown to the worker processes of a large ingest.
Entry points are read once per process, on first use, so importing this module costs nothing.

What the object must be depends on the group:

* ``feedback_insights.sources``: a source class (``kind``, ``config_model``, and a constructor
  ``(config, batch_size)``); see :mod:`feedback_insights.ingest.sources`.
* ``feedback_insights.dialects``: a module or object with ``looks_like``, ``validate`` and
  ``normalise``, and the paths of its people and service (``ACCOUNT_FIELDS``,
  ``IDENTITY_FIELDS``, ``SERVICE_FIELDS``: a dialect whose account sits under a key of its own
  must declare it, or the kept original holds it as sent); see :mod:`feedback_insights.ingest.dialects`.
* ``feedback_insights.sinks``: a function ``(config, warehouse, collectors) -> SinkResult``;
  see :mod:`feedback_insights.publish`.
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import Any


class PluginError(RuntimeError):
    """A plugin that cannot be loaded, or a name nothing is registered under."""


class Registry:
    """The plugins of one entry-point group, by name. Registered names win over entry points."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._found: dict[str, Any] | None = None
        self._registered: dict[str, Any] = {}
        self._lock = threading.Lock()
        #: What is derived from the plugins (hot paths ask for it per record); reset on change.
        self._derived: dict[str, Any] = {}

    def register(self, name: str, plugin: Any) -> None:
        self._registered[name] = plugin
        self._derived.clear()

    def unregister(self, name: str) -> None:
        self._registered.pop(name, None)
        self._derived.clear()

    def items(self) -> dict[str, Any]:
        """Every plugin: entry points first, in the order the installed metadata lists them,
        then those registered in code."""
        if "items" not in self._derived:
            self._derived["items"] = {**self._entry_points(), **self._registered}
        return self._derived["items"]

    def names(self) -> list[str]:
        return list(self.items())

    def get(self, name: str) -> Any:
        plugins = self.items()
        if name not in plugins:
            raise PluginError(f"no {self.group} plugin named {name!r} (known: {', '.join(plugins) or 'none'})")
        return plugins[name]

    def _entry_points(self) -> dict[str, Any]:
        with self._lock:
            if self._found is None:
                found = {}
                for point in entry_points(group=self.group):
                    try:
                        found[point.name] = point.load()
                    except Exception as exc:  # a broken plugin names itself instead of a trace
                        raise PluginError(f"{self.group} plugin {point.name!r} ({point.value}) failed to load: {exc}") from exc
                if not found:
                    raise PluginError(
                        f"no {self.group} plugins installed: install the package (pip install -e .) so its entry points exist"
                    )
                self._found = found
            return self._found


class DialectRegistry(Registry):
    """Dialects are tried in ``ORDER`` (lowest first; default 100), and several may travel under
    one ``CHOICE`` name on the command line and in configuration (default: their own name)."""

    def choices(self) -> dict[str, tuple[str, ...]]:
        """``--dialect`` name → the dialects it covers, both in detection order; ``auto``
        covers all."""
        if "choices" not in self._derived:
            ordered = sorted(self.items().items(), key=lambda item: getattr(item[1], "ORDER", 100))
            covered: dict[str, tuple[str, ...]] = {"auto": tuple(name for name, _ in ordered)}
            for name, dialect in ordered:
                choice = getattr(dialect, "CHOICE", None) or name
                covered[choice] = (*covered.get(choice, ()), name)
            self._derived["choices"] = covered
        return self._derived["choices"]


SOURCES = Registry("feedback_insights.sources")
DIALECTS = DialectRegistry("feedback_insights.dialects")
SINKS = Registry("feedback_insights.sinks")
