"""How long ``feedback-insights --help`` takes in a fresh process, against what any Python CLI pays.

Each command runs ``--repeat`` times (default 15) in a new interpreter, as a user's shell starts
it; the table shows the median and the fastest wall time beside two floors: the bare interpreter
and one that imports only typer and rich (what a typer CLI cannot avoid). Then ``-X importtime``
of ``--help`` names the top-level packages that cost the most to import, so a heavy import that
creeps into a module's top level shows up by name (for ``--help`` and for the heaviest group's).

Run by hand: ``python benchmarks/cli_start.py [--repeat N]``. Target: ``--help`` under 0.5 s on a
quiet machine (read the figures against the floors when the machine is busy).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

PYTHON = sys.executable
COMMANDS = {
    "floor: python -c pass": [PYTHON, "-c", "pass"],
    "floor: import typer, rich": [PYTHON, "-c", "import typer, rich.console"],
    "feedback-insights --help": [PYTHON, "-m", "feedback_insights", "--help"],
    "feedback-insights clusters --help": [PYTHON, "-m", "feedback_insights", "clusters", "--help"],
    "feedback-insights run --help": [PYTHON, "-m", "feedback_insights", "run", "--help"],
}
TARGET = 0.5


def _wall(command: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def _import_costs(command: list[str], top: int = 10) -> list[tuple[str, float]]:
    """Cumulative import time (s) of each package root and of each of our own modules, for
    ``command`` under ``-X importtime``, largest first (a root's figure includes what it imports)."""
    done = subprocess.run([PYTHON, "-X", "importtime", *command[1:]], check=True, capture_output=True, text=True)
    costs: dict[str, float] = {}
    for line in done.stderr.splitlines():
        # "import time: self [us] | cumulative | <indent>module"
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| \s*(\S+)$", line)
        if found and ("." not in found.group(2) or found.group(2).startswith("feedback_insights.")):
            costs[found.group(2)] = int(found.group(1)) / 1e6
    return sorted(costs.items(), key=lambda item: -item[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat
    console = Console()
    table = Table(title=f"fresh-process start, {repeat} runs each")
    for column in ("command", "median s", "fastest s", f"under {TARGET} s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, command in COMMANDS.items():
        times = _wall(command, repeat)
        verdict = "" if name.startswith("floor") else ("yes" if statistics.median(times) < TARGET else "NO")
        table.add_row(name, f"{statistics.median(times):.3f}", f"{min(times):.3f}", verdict)
    console.print(table)
    for name in ("feedback-insights --help", "feedback-insights clusters --help"):
        costs = Table(title=f"where {name}'s imports go (cumulative)")
        costs.add_column("module")
        costs.add_column("s", justify="right")
        for module, seconds in _import_costs(COMMANDS[name]):
            costs.add_row(module, f"{seconds:.3f}")
        console.print(costs)


if __name__ == "__main__":
    main()
