"""JSON text for any value a parser can produce, fast.

orjson is several times faster than the standard library but refuses integers beyond 64 bits,
which Python's own parser (and any caller) can hand us; those fall back to ``json``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any, sort_keys: bool = False) -> bytes:
    """Raises ValueError for a value nested too deep for either encoder (orjson stops at 255
    levels, the standard library at the interpreter's recursion limit)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except TypeError:
        try:
            text = json.dumps(value, default=str, sort_keys=sort_keys, ensure_ascii=False, separators=(",", ":"))
        except RecursionError:
            raise ValueError("nested too deep to write as JSON") from None
        return text.encode("utf-8", errors="surrogatepass")
