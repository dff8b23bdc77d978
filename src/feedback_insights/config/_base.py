"""What every configuration section shares: strictness, errors that name their key, secrets."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and key."""


def secret(variable: str, where: str, what: str) -> str:
    """A secret from the environment, or a ConfigError saying which variable to set."""
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"{where}: set {variable} to {what}")
    return value


class Strict(BaseModel):
    """A section: unknown keys are errors, values never change after loading."""

    model_config = ConfigDict(extra="forbid", frozen=True)


#: A GitHub label name (GitHub allows 1–50 characters).
Label = Annotated[str, Field(min_length=1, max_length=50)]
