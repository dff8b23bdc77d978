"""A warehouse remembers which key its pseudonyms were made with (a keyed fingerprint, never the
key) and refuses another one in one line naming the file and the key: with another key every
account would be counted anew, and erased reports would no longer be recognised."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedback_insights.config import ConfigError, load
from feedback_insights.ingest import ingest
from feedback_insights.privacy import Pseudonymiser
from feedback_insights.warehouse import Warehouse

from .conftest import write_jsonl

FIRST = "first-key-of-this-warehouse-0123456789"
OTHER = "another-key-altogether-abcdefghijklmnop"


def _config(folder: Path, key: str) -> Path:
    drop = folder / "drop"
    drop.mkdir(exist_ok=True)
    write_jsonl(drop / "a.jsonl", [{"type": "bug", "goal": "g", "message": "m"}])
    path = folder / "feedback-insights.toml"
    path.write_text(f'[warehouse]\npath = "feedback.duckdb"\n[privacy]\nhmac_key = "{key}"\n'
                    f'[[sources]]\nname = "drop"\nkind = "files"\npath = "drop"\nservice = "acme-api"\n')
    return path


def _ingest(path: Path) -> str:
    config = load(path)
    with Warehouse(config.warehouse.path) as warehouse:
        return ingest(config, warehouse).line()


def test_another_key_is_refused_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = _config(tmp_path, FIRST)
    assert _ingest(path).startswith("new 1 ")
    (tmp_path / "drop" / "b.jsonl").write_text('{"type": "bug", "goal": "g", "message": "n"}\n')
    path = _config(tmp_path, OTHER)
    with pytest.raises(ConfigError) as error:
        _ingest(path)
    assert str(error.value).startswith(f"{path}: privacy.hmac_key: not the key the pseudonyms in "
                                       f"{tmp_path / 'feedback.duckdb'} were made with; nothing was stored")
    assert "\n" not in str(error.value)
    with Warehouse(tmp_path / "feedback.duckdb") as warehouse:
        assert warehouse.con.execute("SELECT count(*) FROM records").fetchall() == [(1,)]
        [(fingerprint,)] = warehouse.con.execute("SELECT fingerprint FROM key_fingerprint").fetchall()
    assert fingerprint == Pseudonymiser(FIRST).fingerprint() != Pseudonymiser(OTHER).fingerprint()
    # The fingerprint is keyed: not the key, nor a plain hash of it.
    import hashlib

    assert FIRST not in fingerprint and hashlib.sha256(FIRST.encode()).hexdigest()[:32] not in fingerprint
    assert FIRST.encode() not in (tmp_path / "feedback.duckdb").read_bytes()
    # The first key still works, and stores what the other was refused.
    assert _ingest(_config(tmp_path, FIRST)).startswith("new 1 ")


def test_the_key_in_the_environment_is_named_when_it_is_the_one_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _config(tmp_path, FIRST)
    _ingest(path)
    monkeypatch.setenv("FEEDBACK_INSIGHTS_HMAC_KEY", OTHER)
    with pytest.raises(ConfigError, match=r": \$FEEDBACK_INSIGHTS_HMAC_KEY: not the key the pseudonyms in "):
        _ingest(path)


def test_a_warehouse_that_recorded_no_key_takes_the_first_one_used(tmp_path: Path) -> None:
    """A warehouse from before keys were recorded: the first run after records its key."""
    path = _config(tmp_path, OTHER)
    with Warehouse(tmp_path / "feedback.duckdb") as warehouse:
        assert warehouse.con.execute("SELECT count(*) FROM key_fingerprint").fetchall() == [(0,)]
    assert _ingest(path).startswith("new 1 ")
    with pytest.raises(ConfigError, match="not the key the pseudonyms"):
        _ingest(_config(tmp_path, FIRST))
