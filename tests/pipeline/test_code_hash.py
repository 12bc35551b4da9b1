"""The code hash the DVC stages depend on: blind to docstrings and comments, sensitive to code, and it follows every
import a stage's code makes (also lazy ones inside functions, the registries' "module:NAME" strings and a registry's
"package.*")."""

from __future__ import annotations

import json
from pathlib import Path

from scpo.pipeline.code_hash import code_hash_lines, import_closure, normalized_source, write_code_hashes

SOURCE = '''"""Module docstring."""

import math  # a comment


def area(r):
    """Area of a circle."""
    return math.pi * r ** 2  # pi r^2
'''


def test_docstrings_comments_and_layout_do_not_change_the_hash_code_does():
    edited_docs = SOURCE.replace("Module docstring.", "Another text.").replace("Area of a circle.", "A * r^2")
    edited_docs = edited_docs.replace("# a comment", "# another comment").replace("r ** 2", "r**2")
    assert normalized_source(edited_docs) == normalized_source(SOURCE)
    assert normalized_source(SOURCE.replace("r ** 2", "r ** 3")) != normalized_source(SOURCE)
    # a function whose only statement is its docstring stays valid code
    assert "Pass" in normalized_source('def f():\n    """doc"""\n')


def _package(root: Path) -> None:
    pkg = root / "scpo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from scpo.sub.eager import x\n")
    (pkg / "sub" / "eager.py").write_text("x = 1\n")
    (pkg / "sub" / "lazy.py").write_text("def f():\n    from scpo import named\n    return named\n")
    (pkg / "named.py").write_text('REGISTRY = {"a": "scpo.plugin:SPEC"}\n')
    (pkg / "plugin.py").write_text("SPEC = 1\n")
    (pkg / "unused.py").write_text("y = 2\n")


def test_the_closure_follows_parents_lazy_imports_and_registry_strings(tmp_path):
    _package(tmp_path)
    got = import_closure(["import scpo.sub.lazy"], tmp_path)
    assert got == {"scpo", "scpo.sub", "scpo.sub.eager", "scpo.sub.lazy", "scpo.named", "scpo.plugin"}


def test_a_package_string_reaches_every_module_of_the_package(tmp_path):
    """A registry that imports every module of a package (the credit registry: "scpo.credit.*") reaches all of them,
    none of which any import names."""
    _package(tmp_path)
    (tmp_path / "scpo" / "methods").mkdir()
    for name in ("__init__", "one", "two"):
        (tmp_path / "scpo" / "methods" / f"{name}.py").write_text("")
    (tmp_path / "scpo" / "found.py").write_text('MODULES = "scpo.methods.*"\n')
    got = import_closure(["import scpo.found"], tmp_path)
    assert got == {"scpo", "scpo.found", "scpo.methods", "scpo.methods.one", "scpo.methods.two"}


def test_a_notebook_file_changes_only_with_the_code_it_reaches(tmp_path):
    _package(tmp_path)
    nb = tmp_path / "notebooks" / "n.ipynb"
    nb.parent.mkdir()
    nb.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "source": ["# title"]},
                    {"cell_type": "code", "source": ["%matplotlib inline\n", "import scpo.named"]},
                ]
            }
        )
    )
    out = tmp_path / "out"
    (path,) = write_code_hashes(nb.parent, out, tmp_path)
    before = path.read_text()
    assert [line.split()[0] for line in before.splitlines()] == ["scpo", "scpo.named", "scpo.plugin"]
    (tmp_path / "scpo" / "plugin.py").write_text('"""Now documented."""\nSPEC = 1  # the same value\n')
    (tmp_path / "scpo" / "unused.py").write_text("y = 3\n")
    write_code_hashes(nb.parent, out, tmp_path)
    assert path.read_text() == before
    (tmp_path / "scpo" / "plugin.py").write_text("SPEC = 2\n")
    write_code_hashes(nb.parent, out, tmp_path)
    changed = [a for a, b in zip(before.splitlines(), path.read_text().splitlines()) if a != b]
    assert [line.split()[0] for line in changed] == ["scpo.plugin"]


def test_the_training_notebook_reaches_the_trainer_every_estimator_and_every_environment(repo_root):
    modules = {line.split()[0] for line in code_hash_lines(repo_root / "notebooks" / "02_train.ipynb", repo_root)}
    assert {
        "scpo.train.run",
        "scpo.policy.hindsight",
        "scpo.credit.scpo",
        "scpo.credit.hcapo",
        "scpo.credit.rloo",
        "scpo.run.plan",
        "scpo.train.trainer",
        "scpo.envs.alfworld",
        "scpo.envs.webshop",
        "scpo.envs.corridor",
        "scpo.rollout.vllm_engine",
    } <= modules
    assert "scpo.pipeline.sweep" not in modules and "scpo.tables.paper" not in modules
