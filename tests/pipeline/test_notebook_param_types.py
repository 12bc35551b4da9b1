"""Notebook parameters are typed at injection: Papermill passes `-p overwrite false` as the string "false" (true in
Python) and `-p seeds 1` as an int where a comma-separated string is expected; both must be parsed or refused in one
line before the notebook acts on them (issue 59, cases 5 and 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scpo.pipeline.notebook_params import NotebookParameterTypeError, parse_parameter, typed_parameters

from helpers.notebooks import write_notebook

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
FALSE_AND_TRUE = [("false", False), ("no", False), ("0", False), ("True", True), (1, True)]


def parameters_cell(notebook: str) -> str:
    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    return next("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", []))


def injected(namespace: dict, notebook: str) -> dict:
    """Run `typed_parameters` on the kernel history Papermill leaves: the parameters cell, then the injected one."""
    cell = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in namespace.items())
    return typed_parameters(dict(namespace), history=["", parameters_cell(notebook), cell])


@pytest.mark.parametrize("notebook", ["02_train.ipynb", "03_evaluate.ipynb"])
@pytest.mark.parametrize(("given", "parsed"), FALSE_AND_TRUE)
def test_overwrite_false_as_a_string_means_false(notebook, given, parsed):
    assert injected({"overwrite": given}, notebook) == {"overwrite": parsed}


@pytest.mark.parametrize("notebook", ["02_train.ipynb", "03_evaluate.ipynb"])
def test_a_non_boolean_overwrite_is_refused_in_one_line(notebook):
    with pytest.raises(NotebookParameterTypeError) as err:
        injected({"overwrite": "maybe"}, notebook)
    assert str(err.value) == (
        "notebook parameter overwrite='maybe' (str): a boolean expected; pass one of true/yes/on/1 or false/no/off/0"
    )


@pytest.mark.parametrize("notebook", ["02_train.ipynb", "03_evaluate.ipynb"])
def test_an_int_where_a_list_is_expected_is_refused_in_one_line(notebook):
    with pytest.raises(NotebookParameterTypeError) as err:
        injected({"seeds": 1}, notebook)
    assert str(err.value) == "notebook parameter seeds=1 (int): a string expected; pass it raw: -r seeds 1"
    assert injected({"seeds": "0,1", "seed": "2"}, notebook) == {"seeds": "0,1", "seed": 2}


def test_the_namespace_is_rebound_and_nothing_is_checked_without_injection():
    namespace = {"overwrite": "false", "In": ["", "overwrite: bool = False\n", "# Parameters\noverwrite = 'false'\n"]}
    assert typed_parameters(namespace) == {"overwrite": False}
    assert namespace["overwrite"] is False
    assert typed_parameters({"overwrite": "false", "In": ["", "overwrite: bool = False\n"]}) == {}
    with pytest.raises(NotebookParameterTypeError, match=r"^notebook parameter seed=True \(bool\): an integer"):
        parse_parameter("seed", True, "int")


def test_every_notebook_types_its_parameters_first():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        first = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
        assert "typed_parameters(globals())" in "".join(cells[first + 1]["source"]), path.name


def test_papermill_injection_of_false_reaches_the_notebook_as_false(tmp_path, repo_root):
    import papermill as pm

    marker = tmp_path / "overwrite.txt"
    write_notebook(
        tmp_path / "nb.ipynb",
        'overwrite: bool = False\nseeds: str = ""\n',
        "from pathlib import Path\n"
        "from scpo.pipeline.notebook_params import typed_parameters\n"
        "typed_parameters(globals())\n"
        f"Path({str(marker)!r}).write_text(repr(overwrite))",
    )
    pm.execute_notebook(
        str(tmp_path / "nb.ipynb"),
        str(tmp_path / "out.ipynb"),
        kernel_name="python3",
        parameters={"overwrite": "false"},
        cwd=str(repo_root),
        progress_bar=False,
    )
    assert marker.read_text() == "False"
