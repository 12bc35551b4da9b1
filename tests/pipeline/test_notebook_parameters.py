"""Notebooks reject parameters their parameters cell does not declare (Papermill only warns and injects them, so a
misspelled `-p enviroment webshop` would run on the default environment and write the default figure)."""

from __future__ import annotations

import pytest

from helpers.notebooks import write_notebook

PARAMETERS = 'params: str = "params.yaml"\nprofile: str = ""\noverrides: str = ""\nenv: str = "alfworld"\n'


def test_injected_names_are_checked_against_the_parameters_cell():
    from scpo.pipeline.notebook import NotebookParameterError, check_injected_parameters, injected_and_declared

    history = ["", PARAMETERS, '# Parameters\nenviroment = "webshop"\nprofile = "smoke"\n', "import json"]
    assert injected_and_declared(history) == (["enviroment", "profile"], ["params", "profile", "overrides", "env"])
    with pytest.raises(NotebookParameterError) as err:
        check_injected_parameters(history)
    assert str(err.value) == (
        "unknown notebook parameter 'enviroment' (passed with -p); this notebook's parameters: "
        "params, profile, overrides, env"
    )
    check_injected_parameters(["", PARAMETERS, '# Parameters\nenv = "webshop"\nPAPERMILL_INPUT_PATH = "a.ipynb"\n'])
    check_injected_parameters(["", PARAMETERS, "import json"])  # JupyterLab: nothing injected, nothing to check


def test_a_misspelled_parameter_fails_the_notebook_in_one_line(tmp_path, repo_root):
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    marker = tmp_path / "figure.png"
    write_notebook(
        tmp_path / "nb.ipynb",
        PARAMETERS,
        "from pathlib import Path\n"
        "from scpo.pipeline.notebook import notebook_config\n"
        "cfg, root = notebook_config(params, profile, overrides, **{'env.name': env})\n"
        f"Path({str(marker)!r}).write_text(cfg.env.name)  # the default figure, written for the wrong env",
    )
    with pytest.raises(PapermillExecutionError) as err:
        pm.execute_notebook(
            str(tmp_path / "nb.ipynb"),
            str(tmp_path / "out.ipynb"),
            kernel_name="python3",
            parameters={"enviroment": "webshop", "profile": "smoke"},
            cwd=str(repo_root),
            progress_bar=False,
        )
    assert err.value.ename == "NotebookParameterError"
    assert err.value.evalue.startswith(
        "unknown notebook parameter 'enviroment' (passed with -p); this notebook's "
        "parameters: params, profile, overrides, env"
    )
    assert not marker.exists()
