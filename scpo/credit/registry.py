"""The registry of credit methods: every module of `scpo.credit` that registers a method is imported once, so each
method registers itself where it is defined (`scpo.credit.spec.credit_method`), and the table, the config section and
the method lists are made from what registered.

    METHODS                   name -> MethodSpec, in name order
    CreditConfig              `CreditOptions` + one section per method (its options model): params.yaml's `credit:`
    compared_methods()        the estimators the reports compare (every method that is not a bound or a reference)
    methods_and_bounds()      those and the bounds whose needs saved rollouts can meet (the fidelity and learning
                              benchmarks' default)

A new method is its module (its options model and its decorated function) and its test; nothing here changes.
Unknown names are errors listing the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from pydantic import create_model

from scpo.credit.options import CreditOptions
from scpo.credit.spec import MethodSpec, registered

__all__ = [
    "METHODS",
    "CreditConfig",
    "MethodSpec",
    "method_spec",
    "available_methods",
    "check_method",
    "compared_methods",
    "methods_and_bounds",
    "METHOD_MODULES",
]

METHOD_MODULES = "scpo.credit.*"  # where methods are defined (scpo.pipeline.code_hash follows this string)


def _import_method_modules() -> None:
    """Import every module of the package that decorates a function with `credit_method` (a line that starts with
    `@credit_method(`)."""
    folder = Path(__file__).parent
    for info in pkgutil.iter_modules([str(folder)]):
        if re.search(r"^@credit_method\(", (folder / f"{info.name}.py").read_text(), flags=re.M):
            importlib.import_module(f"{METHOD_MODULES.removesuffix('.*')}.{info.name}")


_import_method_modules()
METHODS: dict[str, MethodSpec] = dict(sorted(registered().items()))

# params.yaml's `credit:` section: the shared options and one section per registered method, its defaults
CreditConfig = create_model(
    "CreditConfig",
    __base__=CreditOptions,
    __module__=__name__,
    **{name: (spec.options, spec.options()) for name, spec in METHODS.items()},
)


def available_methods() -> tuple[str, ...]:
    """Every registered method, in name order."""
    return tuple(METHODS)


def method_spec(method: str) -> MethodSpec:
    """The registry entry of `method`; KeyError listing the registry for an unknown name."""
    try:
        return METHODS[method]
    except KeyError:
        raise KeyError(f"unknown credit method {method!r}; available: {', '.join(METHODS)}") from None


def check_method(method: str) -> str:
    """`method` if registered, else ValueError listing the registry (config validation)."""
    if method not in METHODS:
        raise ValueError(f"unknown credit method {method!r}; available: {', '.join(METHODS)}")
    return method


def compared_methods() -> tuple[str, ...]:
    """The estimators the reports compare: every method that is not a bound or a reference (`MethodSpec.bound`)."""
    return tuple(name for name, spec in METHODS.items() if spec.bound is None)


def methods_and_bounds() -> tuple[str, ...]:
    """`compared_methods`, then the bounds and references whose needs saved rollouts can meet (not the policy's own
    values, Monte-Carlo or exact, which need the policy: `MethodSpec.needs_policy`)."""
    bounds = tuple(name for name, spec in METHODS.items() if spec.bound is not None and not spec.needs_policy)
    return (*compared_methods(), *bounds)
