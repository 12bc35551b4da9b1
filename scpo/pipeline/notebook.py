"""What every notebook does first: resolve the repository root and build its Config through `load_config`, so Papermill
parameters get the same validation as params.yaml and the CLI.

Notebook parameters are scalars only; dotted config overrides travel as one string, `"key=value; key=value"` (values are
YAML, so `report.methods=[grpo, scpo]` works).

Papermill injects every `-p name value` it is given as a variable, including names the notebook does not declare (it
only warns), so a misspelled `-p enviroment webshop` would run with the default environment. `notebook_config`
therefore first checks the injected names against the parameters cell's (`check_injected_parameters`) and fails with one
line naming the unknown ones and the allowed ones.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from scpo.config import Config, ConfigError, load_config, parse_overrides
from scpo.errors import ExpectedError
from scpo.pipeline.layout import find_repo_root

__all__ = [
    "split_overrides",
    "notebook_config",
    "resolve",
    "check_injected_parameters",
    "NotebookParameterError",
    "injected_and_declared",
]

PAPERMILL_HEADER = "# Parameters"  # the first line of the cell Papermill injects after the `parameters` cell


class NotebookParameterError(ExpectedError, ValueError):
    """A parameter passed to a notebook that its parameters cell does not declare."""


def _assigned_names(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for stmt in tree.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def injected_and_declared(history: list[str]) -> tuple[list[str], list[str]] | None:
    """(injected names, declared names) from a kernel's input history (IPython's `In`): Papermill runs the tagged
    `parameters` cell, then the cell it injected (first line `# Parameters`); None when no injected cell ran
    (JupyterLab, a plain kernel)."""
    for i in range(len(history) - 1, 0, -1):
        if history[i].lstrip().startswith(PAPERMILL_HEADER):
            return _assigned_names(history[i]), _assigned_names(history[i - 1])
    return None


def check_injected_parameters(history: list[str] | None = None) -> None:
    """NotebookParameterError (one line) when Papermill injected a name the parameters cell does not declare.
    `history` defaults to the running kernel's input history; outside a kernel nothing is checked."""
    if history is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
        history = list(shell.user_ns.get("In", [])) if shell is not None else []
    found = injected_and_declared(history)
    if found is None:
        return
    injected, declared = found
    unknown = [n for n in injected if n not in declared and not n.startswith("PAPERMILL_")]
    if unknown:
        raise NotebookParameterError(
            f"unknown notebook parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (passed with "
            f"-p); this notebook's parameters: {', '.join(declared)}"
        )


def split_overrides(overrides: str | None) -> dict[str, Any]:
    """'a.b=1; c=[x, y]' -> {'a.b': 1, 'c': ['x', 'y']}. Empty or None gives {}."""
    items = [item.strip() for item in (overrides or "").split(";") if item.strip()]
    return parse_overrides(items)


def resolve(path: str | Path, root: Path) -> Path:
    """`path` if absolute, else relative to the repository root `root`."""
    path = Path(path)
    return path if path.is_absolute() else root / path


def notebook_config(
    params: str = "params.yaml", profile: str | None = None, overrides: str | None = "", **fixed: Any
) -> tuple[Config, Path]:
    """(cfg, repo_root) for a notebook. `fixed` are dotted keys the notebook sets from its own parameters
    (e.g. `**{"env.name": env}`); `overrides` win over them. Relative paths (data.root, data.shared_dir, train.out_dir,
    train.init_from) are made absolute against the repository root, so a notebook runs the same from the root
    (Papermill, DVC) or from notebooks/ (JupyterLab). Under Papermill, unknown parameters are refused first
    (`check_injected_parameters`)."""
    check_injected_parameters()
    root = find_repo_root(Path(params).parent if Path(params).is_absolute() else None)
    extra = {k: v for k, v in fixed.items() if v is not None and v != ""}
    try:
        extra.update(split_overrides(overrides))
    except ConfigError as err:
        raise ConfigError(f"notebook parameter overrides={overrides!r}: {err}") from None
    cfg = load_config(resolve(params, root), profile=profile or None, overrides=extra)
    cfg.data.root = str(resolve(cfg.data.root, root))
    cfg.data.shared_dir = str(resolve(cfg.data.shared_dir, root))
    cfg.train.out_dir = str(resolve(cfg.train.out_dir, root))
    if cfg.train.init_from:
        cfg.train.init_from = str(resolve(cfg.train.init_from, root))
    return cfg, root
