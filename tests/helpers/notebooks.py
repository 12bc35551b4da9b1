"""A two-cell notebook for the Papermill tests: a cell tagged `parameters` and a body, on the python3 kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat


def write_notebook(path: Path, parameters: str, body: str) -> Path:
    """Write the notebook [parameters cell, body cell] to `path` and return `path`."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path
