"""checks/reliability.py judges a notebook case on what a user reads: `papermill`'s own traceback around a cell's
one-line error is never "one clear line"; `scpo notebook`'s single line is, and only when it names the mistake."""

from __future__ import annotations

from helpers.checks import load_check

PAPERMILL_STDERR = """Input Notebook:  notebooks/02_train.ipynb
Output Notebook: WORK/u20.ipynb
Executing notebook with kernel: python3
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/venv/lib/python3.11/site-packages/click/core.py", line 1653, in __call__
    return self.main(*args, **kwargs)
  File "/venv/lib/python3.11/site-packages/papermill/execute.py", line 251, in raise_for_execution_errors
    raise error
papermill.exceptions.PapermillExecutionError:
---------------------------------------------------------------------------
Exception encountered at "In [3]":
ConfigError: CLONE/params.yaml: train.seed = -1 is invalid: Input should be greater than or equal to 0
"""
ONE_LINE = (
    "ConfigError: CLONE/params.yaml: train.seed = -1 is invalid (cell In [3] of the executed notebook WORK/u.ipynb)\n"
)


def test_papermills_traceback_is_not_one_line_and_scpo_notebooks_line_is():
    r = load_check("reliability")
    pm = r.Outcome(1, "", PAPERMILL_STDERR, 9.0)
    said = r._papermill_said(pm)
    assert said.startswith("exit 1, 13 stderr lines (a traceback through click and Papermill), ending in ")
    assert said.endswith(
        '"ConfigError: CLONE/params.yaml: train.seed = -1 is invalid: Input should be greater than or equal to 0"'
    )

    alone = r._notebook_verdict(pm, "no", None, "no", "train.seed")  # a clone without `scpo notebook`
    assert not alone["ok"] and r.outcome_kind(alone) == "not fixed"

    ours = r.Outcome(1, "", ONE_LINE, 9.0)
    both = r._notebook_verdict(pm, "no", ours, "no", "train.seed")
    assert both["ok"] and r.outcome_kind(both) == "line"
    assert "; `scpo notebook`, the same arguments: exit 1, 1 stderr line: " in both["said"]

    assert not r._notebook_verdict(pm, "no", ours, "no", "train.lr")["ok"]  # one line, but not naming the mistake
    traceback = r.Outcome(1, "", "Traceback (most recent call last):\n", 9.0)
    assert not r._notebook_verdict(pm, "no", traceback, "no", "Traceback")["ok"]
    lost = r._notebook_verdict(pm, "yes: 33 of 62 files of the earlier run gone or replaced", ours, "no", "train.seed")
    assert not lost["ok"] and lost["lost"].startswith("yes")
