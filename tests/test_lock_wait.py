"""A maintainer's command run while a flow works on the warehouse waits its turn, says once
what it waits for, and gives up after ``[warehouse] lock_wait`` with one line naming the holder,
never DuckDB's raw lock error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from feedback_insights.config import SAMPLE_HMAC_KEY
from feedback_insights.warehouse import Warehouse, current_holder, exclusive

from .conftest import REPO, run_cli

HOLDER = """
import select, sys
from pathlib import Path
from feedback_insights.warehouse import Warehouse, exclusive
path, seconds, lock = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "lock"
if lock:  # as a flow does: its turn, then the file
    with exclusive(path, "the ingest flow"), Warehouse(path):
        print("held", flush=True)
        select.select([sys.stdin], [], [], seconds)  # until told to let go, or the time is up
else:  # a process that does not take turns: the file alone
    with Warehouse(path):
        print("held", flush=True)
        select.select([sys.stdin], [], [], seconds)
"""


def _setup(folder: Path, lock_wait: float) -> tuple[Path, Path]:
    warehouse = folder / "feedback.duckdb"
    Warehouse(warehouse).close()  # created and migrated
    config = folder / "feedback-insights.toml"
    config.write_text(f'[warehouse]\npath = "{warehouse}"\nlock_wait = {lock_wait}\n\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
    return warehouse, config


@contextmanager
def held(warehouse: Path, seconds: float, lock: bool = True) -> Iterator[subprocess.Popen[str]]:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(warehouse), str(seconds), "lock" if lock else "file"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


def run_cli_while_held(holder: subprocess.Popen[str], *args: str) -> subprocess.CompletedProcess[str]:
    """Runs the command and lets the holder go only once the command says it waits: however slow
    the command is to start, it meets the lock (a fixed hold raced a slow start once in CI)."""
    command = subprocess.Popen([sys.executable, "-m", "feedback_insights", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert command.stderr is not None and holder.stdin is not None
    first = command.stderr.readline()  # the waiting line, or "" if the command ended without waiting
    holder.stdin.close()  # let go
    stdout, rest = command.communicate(timeout=120)
    return subprocess.CompletedProcess(command.args, command.returncode, stdout, first + rest)


def test_a_command_waits_for_the_running_flow_then_runs(tmp_path: Path) -> None:
    warehouse, config = _setup(tmp_path, lock_wait=60)
    with held(warehouse, 60) as holder:
        listed = run_cli_while_held(holder, "drafts", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    assert "0 drafts" in listed.stdout
    waiting = [line for line in listed.stderr.splitlines() if line.startswith("waiting for ")]
    assert len(waiting) == 1, listed.stderr
    assert waiting[0].startswith(f"waiting for the ingest flow (pid {holder.pid}, since ")
    assert "Could not set lock" not in listed.stderr
    assert current_holder(warehouse) == "another process"  # released: nobody named any more


def test_a_command_gives_up_after_the_bound_naming_the_holder(tmp_path: Path) -> None:
    warehouse, config = _setup(tmp_path, lock_wait=1)
    with held(warehouse, 120) as holder:
        approved = run_cli("drafts", "approve", "1", "--config", str(config))
    assert approved.returncode == 2
    error = approved.stderr.splitlines()[-1]
    assert error.startswith(f"error: {warehouse} is still in use by the ingest flow (pid {holder.pid}, since ")
    assert error.endswith("after 1 s; try again when it is done ([warehouse] lock_wait sets how long to wait)")
    assert len(approved.stderr.splitlines()) == 2  # the waiting line, then the error


def test_a_process_holding_the_file_without_the_lock_is_waited_for_too(tmp_path: Path) -> None:
    warehouse, config = _setup(tmp_path, lock_wait=60)
    with held(warehouse, 60, lock=False) as holder:
        listed = run_cli_while_held(holder, "clusters", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    waiting = [line for line in listed.stderr.splitlines() if line.startswith("waiting for ")]
    assert len(waiting) == 1 and f"(pid {holder.pid})" in waiting[0], listed.stderr


def test_a_flow_waits_unbounded_and_is_told_once_whom_it_waits_for(tmp_path: Path) -> None:
    warehouse, _ = _setup(tmp_path, lock_wait=1)
    told: list[str] = []
    with held(warehouse, 2) as holder:
        with exclusive(warehouse, "the insights flow", on_wait=told.append):  # no bound: as long as it takes
            assert current_holder(warehouse).startswith(f"the insights flow (pid {os.getpid()}, since ")
    assert len(told) == 1 and told[0].startswith(f"the ingest flow (pid {holder.pid}, since ")


def test_a_killed_holder_is_not_named(tmp_path: Path) -> None:
    warehouse, _ = _setup(tmp_path, lock_wait=1)
    with held(warehouse, 120) as holder:
        assert current_holder(warehouse).startswith(f"the ingest flow (pid {holder.pid}")
        holder.kill()
        holder.wait(timeout=30)
    assert "the ingest flow" in (warehouse.parent / "feedback.duckdb.lock").read_text()  # left behind
    assert current_holder(warehouse) == "another process"


def test_what_the_warehouse_leaves_in_its_folder_is_ignored_by_git(tmp_path: Path) -> None:
    """The lock file stays (deleting an flock's file under a process waiting on it would let a
    third take a lock of its own): the repository's .gitignore ignores it, with the warehouse
    and its write-ahead log, so that ``git status`` after a run in a clone shows nothing new."""
    shutil.copyfile(REPO / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    warehouse = tmp_path / "feedback.duckdb"
    with exclusive(warehouse, "the test"), Warehouse(warehouse) as wh:
        wh.con.execute("CREATE TABLE t AS SELECT 1 AS x")
        wh.rewrite()
        left = sorted(p.name for p in tmp_path.iterdir() if p.name not in (".git", ".gitignore"))
    assert "feedback.duckdb.lock" in left and "feedback.duckdb" in left, left
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    assert status.splitlines() == ["?? .gitignore"], (left, status)
