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

from helpers import REPO

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


def _method_params_file(stage) -> str | None:
    files = [str(d.def_path) for d in stage.deps if str(d.def_path).startswith("reports/method_params/")]
    assert len(files) <= 1, files
    return files[0] if files else None


def _reads(stage, dotted: str) -> bool:
    """Whether `stage` depends on params.yaml's `dotted` key: listed (or a section above it), or through its method's
    options file (reports/method_params/<method>.yaml, which holds the sections the method reads)."""
    if any(dotted.startswith(k + ".") or k == dotted for k in _param_keys(stage)):
        return True
    file = _method_params_file(stage)
    if file is None:
        return False
    from scpo.config import load_config
    from scpo.pipeline.method_params import method_params

    tree = method_params(load_config(REPO / "params.yaml"), Path(file).stem)
    try:
        _lookup(tree, dotted)
    except KeyError:
        return False
    return True


def test_a_credit_parameter_reaches_only_the_stages_that_read_it(stages):
    readers = {n for n, s in stages.items() if _reads(s, "credit.scpo.tau")}
    expected = {n for n in stages if n.startswith("train@scpo-") or n.startswith("credit_maps@")}
    assert readers == expected | {"method_params", "semantic_inconsistency", "credit_fidelity", "learning", "sokoban"}
    hgpo_train = {n for n, s in stages.items() if _reads(s, "credit.hgpo") and n.startswith("train@")}
    assert hgpo_train == {n for n in stages if n.startswith("train@hgpo-")}
    gigpo_gamma = {n for n, s in stages.items() if _reads(s, "credit.gigpo.gamma") and n.startswith("train@")}
    uses_gigpo = {m for m, spec in _methods().items() if "gigpo" in spec.sections}
    assert gigpo_gamma >= {n for n in stages if n.startswith("train@") and n[6:].rsplit("-", 1)[0] in uses_gigpo}


def _methods():
    from scpo.credit.registry import METHODS

    return METHODS


def test_each_train_stage_reads_its_methods_sections_from_the_registry(stages):
    """A train stage lists every credit section its method's registry spec reads (and success_reward) as params.yaml
    keys, not through an intermediate file another stage writes (`dvc repro -s` would leave that file stale)."""
    for name, stage in stages.items():
        if not name.startswith("train@"):
            continue
        method = name[len("train@") :].rsplit("-", 1)[0]
        assert _method_params_file(stage) is None, name
        for section in [*_methods()[method].sections, "success_reward"]:
            assert _reads(stage, f"credit.{section}"), (name, section)


def test_editing_a_credit_option_changes_the_train_stage_under_dvc_status(tmp_path):
    """`dvc status train@grpo-alfworld` after an edit of `credit.grpo.*` says the stage changed, with no other stage
    run first (it said "up to date" while the stage read reports/method_params/grpo.yaml, which only the skipped
    method_params stage rewrites); an edit of another method's own section leaves it up to date."""
    for rel in ("dvc.yaml", "params.yaml", ".dvc/config", "notebooks/02_train.ipynb", "reports/code_hash/02_train.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    shutil.copytree(REPO / "reports/method_params", tmp_path / "reports/method_params")  # what the other stage wrote
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for rel in ("data/alfworld.manifest.json", "runs/alfworld/sft/seed0/manifest.json"):  # its inputs and outputs,
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)  # so that `dvc commit` records the stage
        (tmp_path / rel).write_text("{}")
    (tmp_path / "runs/alfworld/grpo").mkdir(parents=True)
    (tmp_path / "reports/notebooks/train").mkdir(parents=True)
    (tmp_path / "reports/notebooks/train/alfworld-grpo.ipynb").write_text("{}")
    stage = "train@grpo-alfworld"
    done = _dvc(tmp_path, "commit", "-f", "-q", stage)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in _dvc(tmp_path, "status", stage).stdout

    params = tmp_path / "params.yaml"
    params.write_text(params.read_text().replace("  scpo: {mode: advantage,", "  scpo: {mode: probability,", 1))
    assert "up to date" in _dvc(tmp_path, "status", stage).stdout
    params.write_text(params.read_text().replace("  grpo: {stats_over: steps}", "  grpo: {stats_over: groups}", 1))
    status = _dvc(tmp_path, "status", stage).stdout
    assert "modified:" in status and "credit.grpo" in status, status


def _papermill_commands(run: str) -> list[list[str]]:
    """The papermill argv(s) of a stage's command: itself, or each command of `python -m scpo.pipeline.side_by_side`."""
    from scpo.pipeline.side_by_side import parse_commands

    argv = shlex.split(run)
    if argv[:3] == ["python", "-m", "scpo.pipeline.side_by_side"]:
        return [shlex.split(command) for _, command in parse_commands(argv[3:])]
    return [argv]


def test_commands_run_notebooks_with_their_declared_parameters(stages):
    import papermill as pm

    declared = {nb.name: set(pm.inspect_notebook(str(nb))) for nb in NOTEBOOKS}
    for name, stage in stages.items():
        if name in ("code_hash", "method_params"):
            continue
        mkdir, sep, run = stage.cmd.partition(" && ")
        commands = _papermill_commands(run)
        outs = {o.def_path for o in stage.outs}
        for argv in commands:
            assert argv[0] == "papermill", name
            assert shlex.split(mkdir) == ["mkdir", "-p", str(Path(argv[2]).parent)], "papermill needs the output folder"
            notebook = Path(argv[1]).name
            assert notebook in declared, f"{name} runs {argv[1]}, which is not in notebooks/"
            assert argv[2].startswith("reports/notebooks/"), f"{name}: executed notebooks go under reports/notebooks/"
            assert argv[2] in outs, f"{name}: its executed notebook {argv[2]} must be one of its outputs"
            passed = {argv[i + 1] for i, a in enumerate(argv) if a == "-p"}
            assert passed <= declared[notebook], (
                f"{name} passes {passed - declared[notebook]} not declared by {notebook}"
            )
            assert any(d.def_path == f"notebooks/{notebook}" for d in stage.deps), f"{name} must depend on its notebook"
            code = f"reports/code_hash/{Path(notebook).stem}.txt"
            assert any(d.def_path == code for d in stage.deps), f"{name} must depend on its notebook's code hash {code}"


def test_the_sft_stage_trains_every_environment_side_by_side(stages):
    """One stage, both warm starts at once (DVC runs one stage at a time; each SFT is single-threaded): every
    environment of report.envs gets its SFT, its run folder, its env options and its data manifest as dependencies."""
    from scpo.config import load_config

    cfg = load_config(REPO / "params.yaml")
    stage = stages["sft"]
    trained = []
    for argv in _papermill_commands(stage.cmd.partition(" && ")[2]):
        passed = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "-p"}
        assert passed["stage"] == "sft"
        trained.append(passed["env"])
    assert sorted(trained) == sorted(cfg.report.envs)
    outs = {o.def_path for o in stage.outs}
    params = {(d.def_path, key) for d in stage.deps for key in (getattr(d, "params", None) or [])}
    params_files = {d.def_path for d in stage.deps if hasattr(d, "params")}
    for env in cfg.report.envs:
        assert f"{cfg.train.out_dir}/{env}/sft/seed{cfg.train.seed}" in outs, env
        assert ("params.yaml", f"env.{env}") in params, env
        assert f"{cfg.data.root}/{env}.manifest.json" in params_files, env


def test_stages_depend_on_code_hashes_not_on_the_package_folders(stages):
    """A docstring edit must re-run nothing but `code_hash` and `method_params` (both cheap): no other stage depends on
    scpo/ sources directly, and code_hash writes the file of every notebook."""
    for name, stage in stages.items():
        scpo_deps = [d.def_path for d in stage.deps if str(d.def_path).startswith("scpo")]
        assert scpo_deps == (["scpo"] if name in ("code_hash", "method_params") else []), f"{name}: {scpo_deps}"
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
                assert (
                    path == "params.yaml" or path.endswith("manifest.json") or path.startswith("reports/method_params/")
                ), (name, path)
                continue
            assert any(t == path or t.startswith(path.rstrip("/") + "/") for t in tracked), (name, path)


def test_no_cached_output_is_committed(stages):
    """DVC refuses to run a stage whose cached output git tracks ("output ... is already tracked by SCM"): a fresh
    clone's `make repro` stopped at train@graphgpo-alfworld, whose executed notebook had been committed."""
    committed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--cached"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name, stage in stages.items():
        for out in stage.outs:
            if out.use_cache:
                path = str(out.def_path).rstrip("/")
                assert not [t for t in committed if t == path or t.startswith(path + "/")], (name, path)


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
        "sft",
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


def test_the_committed_lock_holds_only_stages_dvc_yaml_defines(stages):
    """Stale entries (stages renamed or removed) make DVC's rewrite of dvc.lock after every stage slower; `make repro`
    prunes them (scpo.pipeline.lockfile)."""
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
    assert set(lock) <= set(stages), sorted(set(lock) - set(stages))[:5]


def test_pruning_the_lock_removes_stale_entries_only(tmp_path):
    from scpo.pipeline.lockfile import prune_stale_stages

    for name in ("dvc.yaml", "params.yaml", "dvc.lock"):
        shutil.copy(REPO / name, tmp_path / name)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("")
    kept = (tmp_path / "dvc.lock").read_text()
    stale = "  train@gone-alfworld-0:\n    cmd: echo gone\n"
    (tmp_path / "dvc.lock").write_text(kept.replace("stages:\n", "stages:\n" + stale, 1))
    assert prune_stale_stages(tmp_path) == ["train@gone-alfworld-0"]
    assert (tmp_path / "dvc.lock").read_text() == kept
