"""Notebook parameters typed at injection: each value Papermill injects is checked against the annotation of the same
name in the notebook's `parameters` cell (`overwrite: bool = False`, `seed: int = 0`, `seeds: str = ""`), converted
where the meaning is unambiguous and refused in one line otherwise.

Papermill parses `-p name value` as YAML-ish text (an int, a float, a bool for `True`/`False`, else the string), so
`-p overwrite false` arrives as the string "false", which Python counts as true, and `-p seeds 1` arrives as the int 1
where a comma-separated string is expected. The rules:

- `bool`: a bool; the ints 0 and 1; the strings true/false, yes/no, on/off, 1/0 (any case). Anything else is refused.
- `int`: an int (not a bool), or a string of digits. `float`: an int or a float, or a string that parses as a float.
- `str`: a string only; a number is refused with the hint to pass it raw (`-r seeds 1`), since a comma-separated list
  of one number and a number are not told apart by Papermill.

Call `typed_parameters(globals())` first in the notebook's first code cell; it rebinds the converted values in that
namespace. Outside Papermill (JupyterLab, a plain kernel) nothing was injected and nothing is checked.
"""

from __future__ import annotations

import ast
from collections.abc import MutableMapping
from typing import Any

from scpo.errors import ExpectedError
from scpo.pipeline.notebook import PAPERMILL_HEADER, check_injected_parameters

__all__ = ["NotebookParameterTypeError", "declared_types", "parse_parameter", "typed_parameters"]

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


class NotebookParameterTypeError(ExpectedError, ValueError):
    """A notebook parameter whose injected value does not fit the type its parameters cell declares."""


def declared_types(source: str) -> dict[str, str]:
    """{name: annotation} of the annotated assignments of a parameters cell (`seed: int = 0` -> {'seed': 'int'})."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    return {
        stmt.target.id: stmt.annotation.id
        for stmt in tree.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and isinstance(stmt.annotation, ast.Name)
    }


def _refuse(name: str, value: Any, kind: str, allowed: str) -> NotebookParameterTypeError:
    return NotebookParameterTypeError(
        f"notebook parameter {name}={value!r} ({type(value).__name__}): {kind} expected; {allowed}"
    )


def parse_parameter(name: str, value: Any, kind: str) -> Any:
    """`value` as the type `kind` ('bool', 'int', 'float', 'str'; other annotations pass unchanged), or
    NotebookParameterTypeError naming the parameter, the value and what is accepted."""
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
            return value.strip().lower() in TRUE_WORDS
        raise _refuse(name, value, "a boolean", f"pass one of {'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}")
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        raise _refuse(name, value, "an integer", f"pass e.g. -p {name} 3")
    if kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise _refuse(name, value, "a number", f"pass e.g. -p {name} 0.5")
    if kind == "str":
        if isinstance(value, str):
            return value
        raise _refuse(name, value, "a string", f"pass it raw: -r {name} {value}")
    return value


def typed_parameters(namespace: MutableMapping[str, Any], history: list[str] | None = None) -> dict[str, Any]:
    """Check the parameters Papermill injected into `namespace` (a notebook's `globals()`) against the parameters
    cell's annotations, rebind the converted values there and return {name: value} of the injected ones. Unknown
    names are refused first (`check_injected_parameters`). `history` defaults to the kernel's input history
    (`namespace["In"]`); without an injected cell nothing is checked and {} is returned."""
    history = list(namespace.get("In", [])) if history is None else history
    check_injected_parameters(history)
    for i in range(len(history) - 1, 0, -1):
        if history[i].lstrip().startswith(PAPERMILL_HEADER):
            injected, declared = history[i], history[i - 1]
            break
    else:
        return {}
    kinds = declared_types(declared)
    typed = {}
    for name in _injected_names(injected):
        if name in kinds and name in namespace:
            typed[name] = namespace[name] = parse_parameter(name, namespace[name], kinds[name])
    return typed


def _injected_names(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [t.id for stmt in tree.body if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)]
