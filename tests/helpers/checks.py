"""Scripts of the repository that are not in a package (checks/, experiments/) loaded as modules, for the tests that
call their functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from helpers import REPO


def load_script(path: str) -> ModuleType:
    """The script at `path` (relative to the repository root) as a module named after its file."""
    path = REPO / path
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_check(name: str) -> ModuleType:
    """checks/<name>.py as a module named `name`."""
    return load_script(f"checks/{name}.py")
