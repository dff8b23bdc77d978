"""Limits every entry point shares, defined once."""

from __future__ import annotations

#: The body size limit of a report, in bytes: AFP's (§3) default. Configuration may only raise it.
DEFAULT_MAX_BYTES = 16_384
