"""Every table has one owning stage, and erasure reaches every table that names a record.

Each stage's package declares the tables it owns (``TABLES``); the migrated warehouse must be
exactly their union, no table owned twice. Which tables name a record is read from the schema,
not from a list kept by hand: a ``<prefix>collector`` column beside a ``<prefix>id`` column is a
record's key, a ``text_sha256`` or ``embedded_sha256`` column a report text's hash. For each, a
probe row naming one record is planted, the record is erased, and no row may name it still.
A table added without erasure fails here: the last test plants one and shows it is caught.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson
import pytest

import feedback_insights
from feedback_insights.warehouse import Ledger, Warehouse, erase_records

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
ERASED = ("probe-collector", "probe-record")
TEXT_HASH = "f" * 64
TEXT_HASH_COLUMNS = ("text_sha256", "embedded_sha256")
#: A (collector, id) pair whose id is not a record's: the quarantine entry's own id (``q_…``).
#: The records a quarantine entry became are in its ``record_ids``, probed by their own test.
NOT_RECORD_KEYS = {("quarantine", "")}

#: A value of each column type the schema uses, for a probe row.
_VALUES = {"VARCHAR": "'probe'", "INTEGER": "1", "BIGINT": "1", "TINYINT": "1", "DOUBLE": "0.5",
           "BOOLEAN": "false", "TIMESTAMP WITH TIME ZONE": "now()", "JSON": "'[]'", "VARCHAR[]": "[]",
           "FLOAT[]": "[0.5]"}


def _owners() -> dict[str, frozenset[str]]:
    return {stage: importlib.import_module(f"feedback_insights.{stage}").TABLES
            for stage in feedback_insights.STAGES
            if hasattr(importlib.import_module(f"feedback_insights.{stage}"), "TABLES")}


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    rows = con.execute("""SELECT table_name, column_name, data_type FROM duckdb_columns()
                          WHERE database_name = current_database() AND schema_name = 'main'
                          ORDER BY table_name, column_index""").fetchall()
    tables: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, {})[column] = kind
    return tables


def _record_keys(columns: dict[str, dict[str, str]]) -> Iterator[tuple[str, str]]:
    """``(table, prefix)`` of every column pair that names a record."""
    for table, named in columns.items():
        for column in named:
            prefix = column.removesuffix("collector")
            if column.endswith("collector") and f"{prefix}id" in named and (table, prefix) not in NOT_RECORD_KEYS:
                yield table, prefix


def _plant(con: duckdb.DuckDBPyConnection, table: str, kinds: dict[str, str], values: dict[str, str]) -> None:
    """One row in ``table``: ``values`` where given (SQL literals), a value of its type elsewhere."""
    literals = {column: values.get(column, _VALUES[kind]) for column, kind in kinds.items()}
    con.execute(f"INSERT INTO {table} ({', '.join(map(_quoted, literals))}) VALUES ({', '.join(literals.values())})")


def _quoted(name: str) -> str:
    return f'"{name}"'


def _naming(con: duckdb.DuckDBPyConnection, columns: dict[str, dict[str, str]]) -> list[str]:
    """The tables (and columns) where a row still names the erased record or its text."""
    collector, record_id = ERASED
    left = [f"{table}.{prefix}collector/{prefix}id" for table, prefix in _record_keys(columns)
            if con.execute(f'SELECT count(*) FROM {table} WHERE "{prefix}collector" = ? AND "{prefix}id" = ?',
                           [collector, record_id]).fetchall()[0][0]]
    left += [f"{table}.{column}" for table, named in columns.items() for column in named
             if column in TEXT_HASH_COLUMNS
             and con.execute(f'SELECT count(*) FROM {table} WHERE "{column}" = ?', [TEXT_HASH]).fetchall()[0][0]]
    return left


def _probe_erasure(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Plant one row naming the probe record (or its text) in every table that can name one,
    erase the record, and answer what still names it."""
    columns = _columns(con)
    collector, record_id = ERASED
    key = {"collector": f"'{collector}'", "id": f"'{record_id}'"}
    planted: dict[str, dict[str, str]] = {}
    for table, prefix in _record_keys(columns):
        planted.setdefault(table, {}).update({f"{prefix}{name}": value for name, value in key.items()})
    for table, named in columns.items():
        for column in named:
            if column in TEXT_HASH_COLUMNS:
                planted.setdefault(table, {})[column] = f"'{TEXT_HASH}'"
    for table, values in planted.items():
        _plant(con, table, columns[table], values)
    assert _naming(con, columns), "the probe rows were not planted"
    erase_records(con, [ERASED], "probe", None, Ledger("k" * 32))
    return _naming(con, columns)


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "owners.duckdb") as wh:
        yield wh


def test_every_table_has_exactly_one_owning_stage(warehouse: Warehouse) -> None:
    owners = _owners()
    owned = [table for tables in owners.values() for table in tables]
    twice = sorted({table for table in owned if owned.count(table) > 1})
    assert twice == [], f"owned by more than one stage: {twice}"
    assert sorted(owned) == sorted(_columns(warehouse.con)), "the stages' TABLES are not the migrated warehouse"


def test_erasure_reaches_every_table_that_names_a_record(warehouse: Warehouse) -> None:
    assert _probe_erasure(warehouse.con) == []


def test_a_quarantine_entry_that_became_the_record_is_erased(warehouse: Warehouse) -> None:
    columns = _columns(warehouse.con)
    collector, record_id = ERASED
    _plant(warehouse.con, "quarantine", columns["quarantine"],
           {"id": "'q_probe'", "collector": f"'{collector}'", "record_ids": f"'[\"{record_id}\"]'"})
    erase_records(warehouse.con, [ERASED], "probe", None, Ledger("k" * 32))
    assert warehouse.con.execute("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_a_table_added_without_erasure_is_caught(warehouse: Warehouse) -> None:
    """The probe is the check: a new table keyed by a record, or by a text's hash, that erasure
    does not know is found, whatever its columns are called around the key."""
    warehouse.con.execute("CREATE TABLE record_notes (note VARCHAR, collector VARCHAR, id VARCHAR)")
    warehouse.con.execute("CREATE TABLE text_votes (votes INTEGER, text_sha256 VARCHAR)")
    warehouse.con.execute("CREATE TABLE replies (reply_collector VARCHAR, reply_id VARCHAR)")
    left = _probe_erasure(warehouse.con)
    assert left == ["record_notes.collector/id", "replies.reply_collector/reply_id", "text_votes.text_sha256"]


def test_the_docs_list_every_table_under_its_stage() -> None:
    """The architecture's table list is the declarations: each stage's tables, every one named."""
    section = ARCHITECTURE.read_text(encoding="utf-8").split("## The warehouse", 1)[1].split("\n## ", 1)[0]
    assert _listed(section) == {stage: set(tables) for stage, tables in _owners().items()}


def _listed(section: str) -> dict[str, set[str]]:
    """The ``- **stage**: `table` (what it holds), …`` items of the warehouse section,
    each item running to the next one or a blank line."""
    items = re.findall(r"^- \*\*([a-z]+)\*\*:(.*?)(?=^- |^$|\Z)", section, re.M | re.S)
    return {stage: set(re.findall(r"`([a-z_]+)`", text)) for stage, text in items}


def test_a_correction_keeps_no_erased_id_nor_the_name_it_saved(warehouse: Warehouse) -> None:
    """A split or move lists the records it took, and an undoable merge saved the absorbed
    cluster's name (a report's words): the erased id leaves the list, the name becomes null (an
    undo lets the naming rule name the cluster again), the rest of what an undo needs stays."""
    con, columns = warehouse.con, _columns(warehouse.con)
    collector, record_id = ERASED
    _plant(con, "cluster_members", columns["cluster_members"],
           {"collector": f"'{collector}'", "id": f"'{record_id}'", "cluster_id": "7"})
    _plant(con, "cluster_actions", columns["cluster_actions"],
           {"cluster_id": "7", "records": f"'[\"{collector}:{record_id}\", \"other:kept\"]'",
            "before": "'{\"label\": \"acme export fails for Jane\", \"status\": \"open\"}'"})
    erase_records(con, [ERASED], "probe", None, Ledger("k" * 32))
    [(records, before)] = con.execute("SELECT records, before FROM cluster_actions").fetchall()
    assert (orjson.loads(records), orjson.loads(before)) == (["other:kept"], {"label": None, "status": "open"})
