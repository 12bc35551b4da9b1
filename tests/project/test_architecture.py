"""The package's architecture, read from the source with `ast` (nothing imported): no import circle between modules
(module- or function-level imports alike), no private name imported from another module, and each subpackage depending
only on the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import REPO

# the code that must keep to public names (tests may reach into a module they test)
PYTHON_FILES = sorted(
    p for folder in ("scpo", "benchmarks", "experiments", "checks") for p in (REPO / folder).rglob("*.py")
)

# subpackage -> the subpackages it may import (top-level modules count as subpackages)
LAYERS = {
    "errors": set(),
    "batch": set(),
    "strict_model": set(),
    "numerics": set(),
    "workers": set(),  # process pools, stdlib only: seeds, learning runs, hindsight scorers, inconsistency counts
    "software": {"numerics"},
    "scorers": set(),
    "envs": {"data", "batch", "strict_model"},  # data: ALFWorld's game-file reader
    "data": {"envs", "errors"},  # prepare-data builds the WebShop catalogue
    "credit": {"batch", "scorers", "strict_model"},
    "policy": {"batch", "envs", "errors", "workers"},  # the answer tags become tokens of the tiny tokenizer
    "rollout": {"envs", "policy", "batch"},
    "config": {"credit", "envs", "errors", "strict_model"},
    "pipeline": {"config", "credit", "errors"},  # credit: each method's option sections (method_params)
    # a run decided once and its folder: plan, inputs, lock, guards, provenance, checkpoints, history
    "run": {"config", "envs", "errors", "pipeline", "policy", "scpo", "software"},  # scpo: __version__
    # the learning: warm start, trainer, update, evaluation, a stage's seeds side by side
    "train": {"batch", "config", "credit", "envs", "errors", "pipeline", "policy", "rollout", "run", "workers"},
    "analysis": {"batch", "config", "credit", "errors", "pipeline", "scorers", "workers"},
    "tables": {"config", "pipeline"},
    "testbeds": {
        "analysis",
        "batch",
        "config",
        "credit",
        "envs",
        "errors",
        "numerics",  # the CPU pin's variables: the Sokoban stage re-run under another kernel family (sokoban_stage)
        "pipeline",
        "policy",
        "rollout",
        "run",
        "tables",
        "train",
        "workers",
    },
    "integrations": {"credit", "batch", "scorers"},
    "importers": {"batch", "errors"},  # light: installs into a trainer's environment without the suite
    "launcher": {"cli"},  # the `scpo` script: scpo.cli, or one line where the suite is not installed
    "cli": {
        "analysis",
        "config",
        "credit",
        "data",
        "envs",
        "errors",
        "importers",
        "pipeline",
        "policy",
        "software",
        "testbeds",
        "train",
    },
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in (REPO / "scpo").rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        out[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The deepest module of the package that `name` (a module or a module attribute) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules its import statements name (anywhere in the module)."""
    graph = {}
    for module, path in MODULES.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {_resolve(a.name) for a in node.names if a.name.split(".")[0] == "scpo"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "scpo":
                targets |= {_resolve(f"{node.module}.{a.name}") for a in node.names}
        graph[module] = targets - {module, None}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_modules():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "scpo"


def test_each_subpackage_imports_only_the_layers_below_it():
    wrong = sorted(
        {
            (_layer(m), _layer(t))
            for m, targets in import_graph().items()
            for t in targets
            if _layer(t) != _layer(m) and _layer(t) not in LAYERS[_layer(m)]
        }
    )
    assert wrong == []


@pytest.mark.parametrize("path", PYTHON_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_private_name_is_imported_from_another_module(path):
    tree = ast.parse(path.read_text())
    aliases = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
        if a.name.startswith("scpo")
    }
    aliases |= {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("scpo")
        for a in n.names
        if f"{n.module}.{a.name}" in MODULES
    }
    private = [
        f"{n.module}.{a.name}"
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("scpo")
        for a in n.names
        if a.name.startswith("_")
    ]
    private += [
        f"{n.value.id}.{n.attr}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id in aliases
        and n.attr.startswith("_")
        and not n.attr.startswith("__")
    ]
    assert private == []


# private attributes read on an object other than self / cls, each with its reason
PRIVATE_ACCESS_ALLOWED = {
    ("scpo/analysis/explorer.py", "self.widget._repr_mimebundle_"): "IPython's display protocol, public by convention",
    ("scpo/config.py", "cfg._origin"): "the config module sets its own model's private attribute",
    ("scpo/envs/alfworld/textworld_engine.py", "textgen._parse_and_convert"): "memoises textworld's grammar parser",
}


def private_accesses(path: Path) -> set[str]:
    """`x._name` expressions of a module where x is not `self` or `cls` (calls and reads alike)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        private = isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
        if private and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.add(ast.unparse(node))
    return found


def test_no_private_attribute_is_used_across_objects():
    """A module uses another object's public interface only (the planner calls the engine's `won`, `apply` and
    `admissible_actions`, not its internals); the few exceptions are listed with their reasons."""
    used = {
        (str(p.relative_to(REPO)), expr) for p in sorted((REPO / "scpo").rglob("*.py")) for expr in private_accesses(p)
    }
    assert used - set(PRIVATE_ACCESS_ALLOWED) == set()
    assert set(PRIVATE_ACCESS_ALLOWED) - used == set(), "an allowed exception no longer occurs: drop it"


def test_the_private_access_finder_finds_one(tmp_path):
    (tmp_path / "m.py").write_text("def f(e, self):\n    self._ok()\n    return e._won() or e.public\n")
    assert private_accesses(tmp_path / "m.py") == {"e._won"}


def test_sources_cite_the_repositorys_own_specification():
    """Docstrings point to docs/algorithms.md, never to a file outside the repository."""
    outside = [str(p.relative_to(REPO)) for p in PYTHON_FILES if "shared/algorithms.md" in p.read_text()]
    assert outside == []
