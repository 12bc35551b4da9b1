"""The scripts under checks/ (not a package) loaded as modules, for the tests that call their functions."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from helpers import REPO


def load_check(name: str) -> ModuleType:
    """checks/<name>.py as a module named `name`."""
    spec = importlib.util.spec_from_file_location(name, REPO / "checks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
