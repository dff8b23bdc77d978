"""What every stage shares: the canonical record, problems, the vocabulary, JSON Schema
validation, JSON text, resource folders, the clock, limits, retrying and the plugin registries.

Nothing here knows about any stage; every other package may import it.
"""

from . import jsontext, vocabulary
from ._clock import now_utc
from ._limits import DEFAULT_MAX_BYTES, MAX_DEPTH, depth_problem
from ._plugins import DIALECTS, SINKS, SOURCES, DialectRegistry, PluginError, Registry
from ._problems import Problem, join_path
from ._record import FIELDS, JSON_FIELDS, TEXT_FIELDS, CanonicalRecord, compact
from ._resources import resource_dir, sample_dir, schemas_dir
from ._retrying import GaveUp, retry_after, with_retries
from ._schema import SchemaSet, Validator, compile_schema, is_date_time, shared_schemas

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DIALECTS",
    "FIELDS",
    "JSON_FIELDS",
    "MAX_DEPTH",
    "SINKS",
    "SOURCES",
    "TEXT_FIELDS",
    "CanonicalRecord",
    "DialectRegistry",
    "GaveUp",
    "PluginError",
    "Problem",
    "Registry",
    "SchemaSet",
    "Validator",
    "compact",
    "compile_schema",
    "depth_problem",
    "is_date_time",
    "join_path",
    "jsontext",
    "now_utc",
    "resource_dir",
    "retry_after",
    "sample_dir",
    "schemas_dir",
    "shared_schemas",
    "vocabulary",
    "with_retries",
]
