"""The DVC pipeline as DVC resolves it (dvc.yaml + params.yaml): the method x env x seed matrix, params that exist, the
right stages reading each credit parameter, Papermill parameters the notebooks declare, and notebook hygiene."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def stages():
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        return {s.name: s for s in repo.index.stages}


@pytest.fixture(scope="module")
def params():
    return yaml.safe_load((REPO / "params.yaml").read_text())


def _param_keys(stage) -> list[str]:
    return [k for d in stage.deps if getattr(d, "params", None) is not None for k in d.params]


def _lookup(tree: dict, dotted: str):
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def test_train_and_evaluate_cover_methods_envs_seeds(stages, params):
    rep = params["report"]
    for kind in ("train", "evaluate"):
        expected = {f"{kind}@{m}-{e}" for m in rep["methods"] for e in rep["envs"]}
        assert {n for n in stages if n.startswith(f"{kind}@")} == expected
        for name in expected:  # every seed of report.seeds, side by side in the stage (scpo.train.seed_pool)
            assert "-p seeds report" in stages[name].cmd and "report.seeds" in _param_keys(stages[name])
    assert {"prepare_data", "semantic_inconsistency", "paper_tables"} <= set(stages)
    assert {f"credit_maps@{e}" for e in rep["envs"]} <= set(stages)


def test_every_listed_param_exists(stages, params):
    for stage in stages.values():
        for key in _param_keys(stage):
            _lookup(params, key)  # raises KeyError naming the missing key


def test_a_credit_parameter_reaches_only_the_stages_that_read_it(stages):
    readers = {
        n
        for n, s in stages.items()
        if any("credit.scpo.tau".startswith(k + ".") or k == "credit.scpo.tau" for k in _param_keys(s))
    }
    expected = {n for n in stages if n.startswith("train@scpo-") or n.startswith("credit_maps@")}
    assert readers == expected | {"semantic_inconsistency", "credit_fidelity"}


def test_commands_run_notebooks_with_their_declared_parameters(stages):
    import papermill as pm

    declared = {nb.name: set(pm.inspect_notebook(str(nb))) for nb in NOTEBOOKS}
    for name, stage in stages.items():
        if name == "code_hash":
            continue
        mkdir, sep, run = stage.cmd.partition(" && ")
        argv = shlex.split(run)
        assert argv[0] == "papermill", name
        assert shlex.split(mkdir) == ["mkdir", "-p", str(Path(argv[2]).parent)], "papermill needs the output folder"
        notebook = Path(argv[1]).name
        assert notebook in declared, f"{name} runs {argv[1]}, which is not in notebooks/"
        assert argv[2].startswith("reports/notebooks/"), f"{name}: executed notebooks go under reports/notebooks/"
        passed = {argv[i + 1] for i, a in enumerate(argv) if a == "-p"}
        assert passed <= declared[notebook], f"{name} passes {passed - declared[notebook]} not declared by {notebook}"
        assert any(d.def_path == f"notebooks/{notebook}" for d in stage.deps), f"{name} must depend on its notebook"
        code = f"reports/code_hash/{Path(notebook).stem}.txt"
        assert any(d.def_path == code for d in stage.deps), f"{name} must depend on its notebook's code hash {code}"


def test_stages_depend_on_code_hashes_not_on_the_package_folders(stages):
    """A docstring edit must re-run nothing but `code_hash`: no stage but it depends on scpo/ sources directly, and it
    writes the file of every notebook."""
    for name, stage in stages.items():
        scpo_deps = [d.def_path for d in stage.deps if str(d.def_path).startswith("scpo")]
        assert scpo_deps == (["scpo"] if name == "code_hash" else []), f"{name}: {scpo_deps}"
    written = {o.def_path for o in stages["code_hash"].outs}
    assert written == {f"reports/code_hash/{nb.stem}.txt" for nb in NOTEBOOKS}


def test_plots_read_files_the_pipeline_writes(stages):
    dvc_yaml = yaml.safe_load((REPO / "dvc.yaml").read_text())
    outs = [o.def_path for s in stages.values() for o in s.outs]
    for plot in dvc_yaml["plots"]:
        files = [plot] if isinstance(plot, str) else list(next(iter(plot.values()))["y"])
        for file in files:
            assert any(file.startswith(o.rstrip("/") + "/") or file == o for o in outs), file


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [p for p in out.splitlines() if (REPO / p).is_file() and not (REPO / p).is_symlink()]


def test_every_dependency_exists_in_a_fresh_clone(stages, params):
    """DVC 3.67 hashes each file dependency of a stage before a dry run and fails on one an earlier stage has not
    built; so every file dependency must be committed (a file or a folder holding committed files), and outputs of
    other stages are read through their manifest.json, a params file (which DVC reads as empty until it exists)."""
    tracked = _tracked()
    for name, stage in stages.items():
        for dep in stage.deps:
            path = str(dep.def_path)
            if getattr(dep, "params", None) is not None:
                assert path == "params.yaml" or path.endswith("manifest.json"), (name, path)
                continue
            assert any(t == path or t.startswith(path.rstrip("/") + "/") for t in tracked), (name, path)


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    """The working tree's committed and new files (what a clone of this commit holds), as a git repository."""
    root = tmp_path_factory.mktemp("clone") / "repo"
    for rel in _tracked():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "fresh clone"],
    ):
        subprocess.run(cmd, cwd=root, check=True)
    return root


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_dry_runs_work_in_a_fresh_clone(fresh_clone):
    """Without data/ and runs/ (as cloned): `dvc repro --dry` and `dvc exp run --dry` list the stages (both exited 255
    failing to hash the not yet built data and warm-start folders)."""
    repro = _dvc(fresh_clone, "repro", "--dry")
    assert repro.returncode == 0, repro.stdout[-1500:] + repro.stderr[-1500:]
    for stage in (
        "prepare_data",
        "sft@alfworld",
        "train@scpo-alfworld",
        "evaluate@hcapo-webshop",
        "credit_maps@webshop",
        "semantic_inconsistency",
        "paper_tables",
    ):
        assert f"Running stage '{stage}'" in repro.stdout, stage
    exp = _dvc(fresh_clone, "exp", "run", "-S", "credit.scpo.tau=0.8", "--dry")
    assert exp.returncode == 0, exp.stdout[-1500:] + exp.stderr[-1500:]
    assert "Running stage 'train@scpo-alfworld'" in exp.stdout


def test_plots_render_offline(fresh_clone):
    """`dvc plots show` draws the success-curve PNGs the pipeline makes, embedded in a page that loads nothing from the
    network (DVC's vega plots load vega from a CDN: nothing renders offline)."""
    shown = _dvc(fresh_clone, "plots", "show")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    page = (fresh_clone / "dvc_plots" / "index.html").read_text()
    assert "<img" in page and "success_curves_alfworld" in page
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page), "the page loads something from the network"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_hygiene(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "commit without outputs"
    first = code[0]
    assert "parameters" in first["metadata"].get("tags", []), "the first code cell must be tagged 'parameters'"
    for stmt in ast.parse("".join(first["source"])).body:
        assert isinstance(stmt, (ast.Assign, ast.AnnAssign)), ast.dump(stmt)
        value = stmt.value
        if isinstance(value, ast.UnaryOp):
            value = value.operand
        assert isinstance(value, ast.Constant), f"parameter cell holds scalars only: {ast.unparse(stmt)}"
    source = "".join("".join(c["source"]) for c in code)
    assert "os.chdir" not in source
    assert "notebook_config(" in source, "every notebook builds its Config through scpo.pipeline.notebook"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
