"""The warehouse as a folder of Parquet files, for shared storage or another machine."""

from __future__ import annotations

from pathlib import Path

import duckdb


def export_parquet(warehouse: Path, folder: Path) -> None:
    """Every table as Parquet in ``folder`` (with the schema and sequences), for shared storage
    or another machine; :func:`import_parquet` reads it back."""
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} is not empty: export into a new folder")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute(f"EXPORT DATABASE {_literal(folder)} (FORMAT parquet)")  # takes no parameters


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def import_parquet(folder: Path, warehouse: Path) -> None:
    """A new warehouse file from an :func:`export_parquet` folder."""
    if not (folder / "schema.sql").is_file():
        raise FileNotFoundError(f"{folder} holds no exported warehouse (schema.sql is missing)")
    if warehouse.exists():
        raise FileExistsError(f"{warehouse} exists: import into a new file")
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(warehouse)) as con:
        con.execute(f"IMPORT DATABASE {_literal(folder)}")
