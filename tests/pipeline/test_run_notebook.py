"""`scpo notebook` (`scpo.pipeline.run_notebook`): Papermill's command, with a failed cell reported as the cell showed
it (one line for an everyday mistake) instead of inside Papermill's ~30-line traceback."""

from __future__ import annotations

import subprocess
import sys

from helpers.notebooks import write_notebook

PARAMETERS = 'seed: int = 0\nout: str = ""\n'


def test_a_cell_error_is_the_cells_own_text_and_where():
    from scpo.pipeline.run_notebook import notebook_failure

    line = notebook_failure(
        ["\x1b[31mConfigError\x1b[0m: train.seed = -1 is invalid"], "ConfigError", "x", 3, "o.ipynb"
    )
    assert line == "ConfigError: train.seed = -1 is invalid (cell In [3] of the executed notebook o.ipynb)"
    long = notebook_failure(["Traceback", "  File x", "ValueError: boom"], "ValueError", "boom", 2, "o.ipynb")
    assert long == "Traceback\n  File x\nValueError: boom\n(cell In [2] of the executed notebook o.ipynb)"
    assert (
        notebook_failure([], "CellExecutionError", "", None, "o.ipynb")
        == "CellExecutionError (the executed notebook o.ipynb)"
    )


def _run(*args: str, cwd, command: tuple[str, ...] = ("scpo.pipeline.run_notebook",)) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *command, *args, "-k", "python3", "--no-progress-bar"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_an_expected_error_in_a_cell_is_one_line_where_papermill_prints_a_traceback(tmp_path, repo_root):
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        PARAMETERS,
        "from scpo.errors import DataError\nif seed < 0:\n    raise DataError(f'seed {seed} is negative')\n"
        "open(out, 'w').write('ran')",
    )
    args = (str(nb), str(tmp_path / "out.ipynb"), "-p", "seed", "-1", "-p", "out", str(tmp_path / "ran.txt"))
    ours = _run(*args, cwd=repo_root, command=("scpo.cli", "notebook"))  # `scpo notebook`: `-p seed -1` passed through
    assert ours.returncode == 1
    assert ours.stderr.strip().splitlines() == [
        f"DataError: seed -1 is negative (cell In [3] of the executed notebook {tmp_path / 'out.ipynb'})"
    ]
    theirs = subprocess.run(
        [sys.executable, "-m", "papermill", *args, "-k", "python3", "--no-progress-bar"],
        capture_output=True,
        text=True,
        cwd=repo_root,
        timeout=300,
    )
    assert theirs.returncode == 1  # what `papermill` itself prints: its traceback, the cell's line at the end
    assert "Traceback (most recent call last)" in theirs.stderr and len(theirs.stderr.splitlines()) > 10
    assert theirs.stderr.strip().endswith("DataError: seed -1 is negative")

    done = _run(*args[:2], "-p", "out", str(tmp_path / "ran.txt"), cwd=repo_root)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip() == f"ran {nb}; wrote the executed notebook {tmp_path / 'out.ipynb'}"
    assert (tmp_path / "ran.txt").read_text() == "ran"


def test_another_error_keeps_the_cells_traceback_without_papermills(tmp_path, repo_root):
    nb = write_notebook(tmp_path / "nb.ipynb", PARAMETERS, "def f():\n    return {}['missing']\nf()")
    done = _run(str(nb), str(tmp_path / "out.ipynb"), cwd=repo_root)
    assert done.returncode == 1
    err = done.stderr
    assert "KeyError: 'missing'" in err and "return {}['missing']" in err  # the cell's own traceback
    assert "papermill/cli.py" not in err and "click" not in err
    assert err.strip().endswith(f"(cell In [2] of the executed notebook {tmp_path / 'out.ipynb'})")


def test_usage_errors_are_papermills():
    done = subprocess.run([sys.executable, "-m", "scpo.pipeline.run_notebook"], capture_output=True, text=True)
    assert done.returncode == 2 and "Missing argument 'NOTEBOOK_PATH'" in done.stderr
