"""The "Add a credit method" and "Add an environment" walk-throughs of docs/extending.md (the README's "Extending"),
done in a copy of the repository: each step's code goes into the file the step names, then the new method /
environment is tested, trained and evaluated (and the config-defaults test runs) in that copy, and no file but the
named ones changed: a credit method touches its module and its test, an environment its package and one line of the
environment registry. The README's quick-start snippet runs too. If a walk-through misses a file, or names one that
need not change, this fails."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

README = (REPO / "README.md").read_text()
EXTENDING = (REPO / "docs" / "extending.md").read_text()


def readme_section(title: str) -> str:
    """The walk-through `title` of docs/extending.md (linked from the README's "Extending")."""
    start = EXTENDING.index(f"## {title}\n")
    nxt = EXTENDING.find("\n## ", start + 1)
    return EXTENDING[start : nxt if nxt > 0 else len(EXTENDING)]


def walkthrough_steps(title: str) -> dict[str, list[str]]:
    """{path: [code block, ...]} of a walk-through's numbered steps, in the README's order."""
    steps: dict[str, list[str]] = {}
    path = None
    for chunk in re.split(r"(^\d+\. `[^`]+`)", readme_section(title), flags=re.M):
        head = re.match(r"^\d+\. `([^`]+)`", chunk)
        if head:
            path = head.group(1)
            steps[path] = []
        elif path is not None:
            blocks = re.findall(r"^( *)```\w*\n(.*?)^\1```", chunk, flags=re.M | re.S)
            steps[path] += [
                "\n".join(line[len(indent) :] for line in code.splitlines()) + "\n" for indent, code in blocks
            ]
    return steps


def _block_end(lines: list[str], header: int) -> int:
    """The first line after `header` that is not blank and not indented deeper than it (the end of its block)."""
    indent = len(lines[header]) - len(lines[header].lstrip())
    for j in range(header + 1, len(lines)):
        line = lines[j]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            return j
    return len(lines)


def insert(text: str, header: str, snippet: str, *, after_last: str | None = None, before: bool = False) -> str:
    """`snippet` into the block that starts at the first line matching `header`: before that line (`before`), after the
    block's last line matching `after_last`, or at the end of the block."""
    lines = text.splitlines(keepends=True)
    h = next(i for i, line in enumerate(lines) if re.match(header, line))
    if before:
        at = h
    elif after_last is not None:
        at = 1 + max(i for i in range(h, _block_end(lines, h)) if re.match(after_last, lines[i]))
    else:
        at = _block_end(lines, h)
        while not lines[at - 1].strip():
            at -= 1
    return "".join(lines[:at]) + snippet + ("\n" if before else "") + "".join(lines[at:])


# where each named file's blocks go (a new file is written whole)
PLACES = {"scpo/envs/registry.py": [{"header": r"ENVIRONMENTS: dict\[str, str\] = \{"}]}


def apply_walkthrough(root: Path, steps: dict[str, list[str]]) -> None:
    for rel, blocks in steps.items():
        path = root / rel
        if not path.exists():
            assert len(blocks) == 1, f"{rel}: a new file takes one code block"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(blocks[0])
            continue
        places = PLACES[rel]
        assert len(blocks) == len(places), f"{rel}: {len(blocks)} blocks in the README"
        text = path.read_text()
        for block, place in zip(blocks, places):
            text = insert(text, snippet=block, **place)
        path.write_text(text)


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _copy(tmp_path: Path) -> Path:
    """scpo/, params.yaml and what the tests it runs need (conftest, helpers, the config test)."""
    root = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "scpo", root / "scpo", ignore=ignore)
    shutil.copy(REPO / "params.yaml", root / "params.yaml")
    (root / "tests" / "project").mkdir(parents=True)
    for name in ("conftest.py", "project/test_config.py"):
        shutil.copy(REPO / "tests" / name, root / "tests" / name)
    shutil.copytree(REPO / "tests" / "helpers", root / "tests" / "helpers", ignore=ignore)
    return root


def _run(root: Path, script: str, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(root), "TQDM_DISABLE": "1"}
    proc = subprocess.run(
        [sys.executable, *args] if args else [sys.executable, "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


TINY = (
    '{"policy.tiny_hidden_size": 16, "policy.tiny_layers": 1, "policy.tiny_heads": 2, "policy.tiny_vocab_size": 300,'
    ' "policy.max_new_tokens": 8, "rollout.n_tasks": 2, "rollout.group_size": 2, "train.iterations": 1,'
    ' "train.sft.n_demos": 4, "train.sft.epochs": 1, "eval.n_episodes": 2, "train.out_dir": "runs"}'
)

METHOD_CHECK = f"""
import json
import numpy as np
from scpo.config import load_config
from scpo.credit import available_methods, compute_advantages, estimate
from scpo.credit.synthetic import synthetic_batch
from scpo.train.run import run_training

assert "my_method" in available_methods()
b = synthetic_batch(n_groups=3, group_size=4, max_steps=6, seed=1)
res = compute_advantages("my_method", b, scale=2.0)
mean = np.array([b.episode_return[b.group_id == g].mean() for g in b.group_id])
assert np.allclose(res.advantages, 2.0 * (b.episode_return - mean))
assert list(estimate(b, ["my_method", "hcapo"], unmet="skip")) == ["my_method"]  # HCAPO: no policy here
cfg = load_config("params.yaml", profile="smoke", overrides={{**{TINY}, "env.name": "corridor",
                  "env.corridor.max_steps": 4, "credit.method": "my_method", "credit.my_method.scale": 2.0}})
summary = run_training(cfg, stage="rl")
assert summary["method"] == "my_method" and summary["iterations"] == 1
assert json.load(open("runs/corridor/my_method/seed0/summary.json"))["method"] == "my_method"
"""

ENV_CHECK = f"""
import json
import scpo.envs
from scpo.config import load_config
from scpo.train.evaluate import run_evaluation
from scpo.train.run import run_training

env = scpo.envs.make("echo", task_id="echo-apple")
env.reset()
assert env.step("say apple")[1:3] == (10.0, True)
base = {{**{TINY}, "env.name": "echo"}}
sft = run_training(load_config("params.yaml", profile="smoke", overrides=base), stage="sft")
cfg = load_config("params.yaml", profile="smoke", overrides={{**base, "train.init_from": sft["run_dir"],
                  "env.echo.max_steps": 2}})
assert run_training(cfg, stage="rl")["iterations"] == 1
result = run_evaluation(cfg, checkpoint="runs/echo/gigpo/seed0", out_dir="eval")
assert list(result["splits"]) == ["test"] and result["splits"]["test"]["n"] == 2
assert json.load(open("runs/echo/sft/seed0/summary.json"))["env"] == "echo"
"""


PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider")


@pytest.mark.parametrize(
    ("title", "files", "check"),
    [
        ("Add a credit method", ["scpo/credit/my_method.py", "tests/credit/test_my_method.py"], METHOD_CHECK),
        ("Add an environment", ["scpo/envs/echo.py", "scpo/envs/registry.py"], ENV_CHECK),
    ],
    ids=["credit-method", "environment"],
)
def test_walkthrough_touches_only_the_files_it_names(tmp_path, title, files, check):
    steps = walkthrough_steps(title)
    assert steps and all(steps.values()), steps
    assert list(steps) == files, "a credit method is its module and its test; an environment its package and registry"
    root = _copy(tmp_path)
    before = _tree(root)
    apply_walkthrough(root, steps)
    after = _tree(root)
    changed = {p for p in after if before.get(p) != after[p]} | (set(before) - set(after))
    assert changed == set(steps), "the README names exactly the files the walk-through changes"
    if "scpo/envs/registry.py" in steps:  # one line of the registry
        new, old = ((r / "scpo/envs/registry.py").read_text().splitlines() for r in (root, REPO))
        assert len(set(new) - set(old)) == 1 and len(new) == len(old) + 1
    for test in [p for p in steps if p.startswith("tests/")]:
        _run(root, "", *PYTEST, test)
    _run(root, check)
    # params.yaml still lists every default of the config the pipeline runs with (the test the walk-through relies on)
    _run(root, "", *PYTEST, "tests/project/test_config.py", "-k", "every_default or every_profile or method_lists")
    final = _tree(root)
    assert {p for p in final if p.startswith(("scpo/", "params.yaml")) and before.get(p) != final[p]} == {
        p for p in steps if p.startswith("scpo/")
    }, "training and evaluation wrote nothing into the sources"


def test_the_insertions_land_where_the_walkthrough_says():
    source = "class A:\n    x: int = 1\n\n    def f(self):\n        pass\n\n\nD: dict[str, int] = {\n    'a': 1,\n}\n"
    out = insert(source, r"class A", "    y: int = 2\n", after_last=r"    \w+: ")
    assert "    x: int = 1\n    y: int = 2\n\n    def f" in out
    out = insert(source, r"D: dict", "    'b': 2,\n")
    assert out.endswith("    'a': 1,\n    'b': 2,\n}\n")
    assert insert("a: 1\nb:\n  c: 2\n\nd: 3\n", r"b:", "  e: 4\n") == "a: 1\nb:\n  c: 2\n  e: 4\n\nd: 3\n"


def test_the_quick_start_snippet_runs(tmp_path):
    start = README.index("## Quick start")
    quick = README[start : README.index("\n## ", start)]
    (code,) = re.findall(r"```python\n(.*?)```", quick, flags=re.S)
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code + "\nassert len(res.advantages) > 0\n"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
