"""notebooks/ run top to bottom, as stored (without outputs), in a real Jupyter kernel.

Their cells assert what they show (regions found, skill, no worker killed), so a notebook
that runs is a notebook whose story still holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"


def test_notebooks_are_stored_without_outputs():
    books = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {b.name for b in books} >= {"enso_regions.ipynb", "scaling.ipynb"}
    for book in books:
        nb = nbformat.read(book, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, book.name


@pytest.mark.parametrize("name", ["enso_regions.ipynb", "scaling.ipynb"])
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' stores go under tmp_path
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "data" in o and "image/png" in o["data"]
    ]
    assert images, "the notebook draws its maps"
    assert not list(tmp_path.glob("dcfa-*")), "the notebook removes the stores it wrote"
