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

#: The warehouse's own bookkeeping: which migrations ran, and what erasure did (its audit and
#: the ledger of keyed marks that keeps erased reports out).
TABLES = frozenset({"schema_migrations", "erasures", "erasure_ledger"})

__all__ = ["TABLES", "Erasure", "Ledger", "Warehouse", "WarehouseBusy", "current_holder", "erase_records", "exclusive", "open_when_free", "export_parquet", "import_parquet", "migrate", "registered", "transaction"]
