"""The `scpo` command's entry point (pyproject.toml `[project.scripts]`). The command needs the suite
(`pip install "scpo[suite]"`); in a light install (`pip install scpo`, e.g. a trainer's environment) it ends with one
line naming the missing package and the install that brings it, instead of a traceback."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    try:
        from scpo.cli import app
    except ModuleNotFoundError as err:
        missing = (err.name or "").split(".")[0]
        if not missing or missing == "scpo":
            raise
        sys.exit(f"the scpo command needs the suite, and {missing} is not installed: pip install 'scpo[suite]'")
    app()
