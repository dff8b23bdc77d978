"""The notebooks run top to bottom on the sample, and are kept in git without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from .conftest import REPO, sample_copy

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_there_is_a_notebook() -> None:
    assert [p.name for p in NOTEBOOKS] == ["explore_clusters.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_stored_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_run_top_to_bottom_on_the_sample(
    path: Path, clustered_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEEDBACK_INSIGHTS_WAREHOUSE", str(sample_copy(clustered_sample, tmp_path)))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) == 2  # the map and demand over time
    tables = [o for o in outputs if o.output_type == "execute_result" and "text/html" in o.get("data", {})]
    assert len(tables) == 2  # demand, and one cluster's reports
