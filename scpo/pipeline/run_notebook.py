"""`scpo notebook NOTEBOOK OUTPUT [papermill's options]`: Papermill's own command, with a failed notebook reported as
the notebook showed it instead of inside Papermill's traceback.

`papermill NOTEBOOK OUTPUT -p seed -1` reports any error a cell raised by raising `PapermillExecutionError` from its
command line, so what a user reads is Python's traceback through click and Papermill (about 30 lines) with the
notebook's error appended. A notebook cannot avoid this and still fail: `papermill.execute.raise_for_execution_errors`
raises for every error output except `SystemExit` with code 0 or none (which would exit 0), and a kernel that ends
itself (`os._exit`) is a `DeadKernelError`, printed with its traceback (exit 138).

This command takes Papermill's arguments unchanged and runs Papermill's click command on them (`papermill.cli`). When a
cell fails it prints, on stderr, what that cell showed: for an everyday mistake (`scpo.errors.ExpectedError`, which
renders in a notebook as one line) that line, followed on the same line by the cell and the executed copy; for any
other error the cell's traceback, then that same note. Exit 1. Papermill's log lines (the input and output notebook,
the kernel, "Passed unknown parameter", which this project's notebooks refuse themselves) are off unless `--log-level`
is given; a run that succeeds ends with one line naming the executed notebook. Everything else (Papermill's progress
bar, usage errors, `--help`, a dead kernel) is Papermill's own behaviour and exit code.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

__all__ = ["notebook_failure", "run_notebook", "main"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def notebook_failure(traceback: Sequence[str], ename: str, evalue: str, cell: int | None, output: str) -> str:
    """What a failed cell showed (its traceback entries, colours removed; `ename: evalue` where it showed nothing),
    and where: `(cell In [n] of the executed notebook OUTPUT)` (without `In [n]` for a cell with no execution count),
    on the same line when the cell showed one line."""
    shown = "\n".join(_ANSI.sub("", entry) for entry in traceback).strip() or (
        f"{ename}: {evalue}" if evalue else ename
    )
    where = (
        f"(cell In [{cell}] of the executed notebook {output})"
        if cell is not None
        else f"(the executed notebook {output})"
    )
    return f"{shown} {where}" if "\n" not in shown else f"{shown}\n{where}"


def run_notebook(args: Sequence[str], prog_name: str = "scpo notebook") -> int:
    """Run Papermill's command on `args` (its own arguments; `--log-level ERROR` unless one is given); the exit code.
    A cell's error is printed by `notebook_failure` (exit 1), success as one line naming the executed notebook;
    Papermill prints everything else as it does."""
    import click
    from papermill.cli import papermill as papermill_command
    from papermill.exceptions import PapermillExecutionError

    args = list(args)
    if not any(a == "--log-level" or a.startswith("--log-level=") for a in args):
        args += ["--log-level", "ERROR"]
    try:
        with papermill_command.make_context(prog_name, args) as ctx:
            papermill_command.invoke(ctx)
    except PapermillExecutionError as err:
        output = str(ctx.params.get("output_path") or "-")
        print(notebook_failure(err.traceback, err.ename, err.evalue, err.exec_count, output), file=sys.stderr)
        return 1
    except click.exceptions.Exit as done:  # --help
        return done.exit_code
    except click.ClickException as err:  # a usage error, as Papermill's command shows it
        err.show()
        return err.exit_code
    output = ctx.params.get("output_path") or "-"
    if output != "-":
        print(f"ran {ctx.params.get('notebook_path')}; wrote the executed notebook {output}")
    return 0


def main() -> None:
    sys.exit(run_notebook(sys.argv[1:], prog_name="python -m scpo.pipeline.run_notebook"))


if __name__ == "__main__":
    main()
