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


def test_progress_in_a_notebook_without_ipywidgets(tmp_path):
    """dcfa.progress with a Client in Jupyter, as the docs recommend, aborted the fit with
    ModuleNotFoundError: No module named 'ipywidgets'; it falls back to lines of text."""
    cells = [
        # as in a kernel without ipywidgets, whether or not this machine has it
        "import sys\nsys.modules['ipywidgets'] = None",
        "import dask, dask.array as da, numpy as np\nimport dcfa\n"
        "from distributed import Client\n"
        "client = Client(n_workers=1, threads_per_worker=1, processes=False)\n"
        "dask.config.set({'dcfa.progress': True})",
        "X = da.random.default_rng(0).standard_normal((120, 40), chunks=(30, 40))\n"
        "y = np.random.default_rng(1).standard_normal(120)\n"
        "m = dcfa.moments(X, y)\n"
        "assert m.cross.shape == (41, 41)\n"
        "client.close()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    text = "".join(o.get("text", "") for o in nb.cells[2].outputs if o["output_type"] == "stream")
    assert "100% done after" in text, nb.cells[2].outputs
