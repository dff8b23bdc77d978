"""The warehouse's commands: ``warehouse export`` and ``warehouse import``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import ConfigOption, app, example, load_config, out, warehouse_turn

warehouse_app = typer.Typer(
    no_args_is_help=True,
    help="The DuckDB warehouse as Parquet files, for shared storage or another machine.",
    epilog=example("warehouse export parquet/", "warehouse import parquet/ --config other.toml"),
)
app.add_typer(warehouse_app, name="warehouse")


@warehouse_app.command("export")
def warehouse_export(
    folder: Annotated[Path, typer.Argument(help="A new (or empty) folder.")], config: ConfigOption = None
) -> None:
    """Write every table of the warehouse as Parquet, with its schema and sequences."""
    from ..warehouse import export_parquet

    cfg = load_config(config)
    with warehouse_turn(cfg):
        export_parquet(cfg.warehouse.path, folder)
    out.print(f"exported {cfg.warehouse.path} → {folder}", highlight=False)


@warehouse_app.command("import")
def warehouse_import(
    folder: Annotated[Path, typer.Argument(help="A folder written by warehouse export.")], config: ConfigOption = None
) -> None:
    """Create the configured warehouse file from an exported folder."""
    from ..warehouse import import_parquet

    cfg = load_config(config)
    with warehouse_turn(cfg):
        import_parquet(folder, cfg.warehouse.path)
    out.print(f"imported {folder} → {cfg.warehouse.path}", highlight=False)
