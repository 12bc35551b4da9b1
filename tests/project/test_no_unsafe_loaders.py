"""No code path of the package, its notebooks, benchmarks, experiments or checks unpickles a file: a static scan of
every call and import.

Flagged: an import of pickle-based modules (pickle, dill, cloudpickle, joblib, shelve, marshal), `torch.load` without a
literal `weights_only=True`, any `weights_only=` / `allow_pickle=` / `trust_remote_code=` other than the safe literal,
`yaml.load`/`load_all` without a safe Loader, yaml's unsafe/full loaders, and pandas' `read_pickle`.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from helpers import REPO

PICKLE_MODULES = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}
UNSAFE_CALLS = {"read_pickle", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
SAFE_LITERALS = {"weights_only": True, "allow_pickle": False, "trust_remote_code": False}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def _is_literal(node: ast.AST | None, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def unsafe_loads(source: str) -> list[str]:
    """`line: what` for every unpickling call or import in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: import {n}" for n in names if n.split(".")[0] in PICKLE_MODULES]
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        kwargs = {k.arg: k.value for k in node.keywords}
        if last in UNSAFE_CALLS:
            found.append(f"{node.lineno}: {name}")
        for key, safe in SAFE_LITERALS.items():
            if key in kwargs and not _is_literal(kwargs[key], safe):
                found.append(f"{node.lineno}: {name}({key}={ast.unparse(kwargs[key])})")
        if name.endswith("torch.load") and "weights_only" not in kwargs:
            found.append(f"{node.lineno}: {name} without weights_only=True")
        if name.split(".")[0] == "yaml" and last in ("load", "load_all"):
            loader = kwargs.get("Loader", node.args[1] if len(node.args) > 1 else None)
            if loader is None or _dotted(loader).rsplit(".", 1)[-1] not in SAFE_YAML_LOADERS:
                found.append(f"{node.lineno}: {name} without a safe Loader")
    return found


def _notebook_source(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    lines = [line for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()]
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)  # IPython magics


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ("import torch\ntorch.load(p, weights_only=False)", ["2: torch.load(weights_only=False)"]),
        ("torch.load(p)", ["1: torch.load without weights_only=True"]),
        ("torch.load(p, map_location='cpu', weights_only=flag)", ["1: torch.load(weights_only=flag)"]),
        ("import pickle\npickle.loads(b)", ["1: import pickle"]),
        ("from joblib import load", ["1: import joblib"]),
        ("import cloudpickle as cp", ["1: import cloudpickle"]),
        ("yaml.load(text)", ["1: yaml.load without a safe Loader"]),
        ("yaml.load(text, Loader=yaml.FullLoader)", ["1: yaml.load without a safe Loader"]),
        ("yaml.unsafe_load(text)", ["1: yaml.unsafe_load"]),
        ("np.load(f, allow_pickle=True)", ["1: np.load(allow_pickle=True)"]),
        ("pd.read_pickle(f)", ["1: pd.read_pickle"]),
        (
            "AutoModel.from_pretrained(d, trust_remote_code=True)",
            ["1: AutoModel.from_pretrained(trust_remote_code=True)"],
        ),
        (
            "torch.load(p, weights_only=True)\nyaml.safe_load(t)\nyaml.load(t, Loader=yaml.SafeLoader)\n"
            "yaml.load(t, yaml.CSafeLoader)\nnp.load(f)\nnp.load(f, allow_pickle=False)\njson.loads(s)",
            [],
        ),
    ],
)
def test_the_scan_flags_each_unsafe_form(snippet, expected):
    assert unsafe_loads(snippet) == expected


def test_no_unpickling_anywhere_in_the_package_notebooks_or_benchmarks():
    folders = ("scpo", "benchmarks", "experiments", "checks")  # the last two: after the layout refactor
    files = [p for folder in folders for p in sorted((REPO / folder).rglob("*.py"))]
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert len(files) > 50 and notebooks
    found = [f"{p.relative_to(REPO)}:{hit}" for p in files for hit in unsafe_loads(p.read_text())]
    found += [f"{p.relative_to(REPO)}:{hit}" for p in notebooks for hit in unsafe_loads(_notebook_source(p))]
    assert found == []
