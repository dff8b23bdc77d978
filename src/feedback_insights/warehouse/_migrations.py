"""Schema changes: numbered SQL files in ``migrations/``, applied in order on open and recorded
in ``schema_migrations``."""

from __future__ import annotations

import importlib.resources

import duckdb

from ..core import now_utc
from ._sql import transaction

_MIGRATIONS = importlib.resources.files("feedback_insights.warehouse") / "migrations"


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations this file has not seen yet; returns their names."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMPTZ)"
    )
    done = {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}
    applied = []
    for script in sorted(_MIGRATIONS.iterdir(), key=lambda p: p.name):
        if not script.name.endswith(".sql"):
            continue
        version = int(script.name.split("_", 1)[0])
        if version in done:
            continue
        with transaction(con):
            con.execute(script.read_text(encoding="utf-8"))
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, script.name, now_utc()])
        applied.append(script.name)
    return applied
