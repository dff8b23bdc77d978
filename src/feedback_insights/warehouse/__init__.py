"""The DuckDB warehouse: the one place state lives.

One file, migrated on open; a lock file beside it so flows take turns (DuckDB has one writer);
and every table as Parquet for shared storage. Stages own their SQL; this package knows no
stage.
"""

from ._connection import Warehouse
from ._erase import Erasure, erase_records
from ._ledger import Ledger
from ._lock import WarehouseBusy, current_holder, exclusive, open_when_free
from ._migrations import migrate
from ._parquet import export_parquet, import_parquet
from ._sql import registered, transaction

__all__ = ["Erasure", "Ledger", "Warehouse", "WarehouseBusy", "current_holder", "erase_records", "exclusive", "open_when_free", "export_parquet", "import_parquet", "migrate", "registered", "transaction"]
