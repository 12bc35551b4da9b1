"""`pip install scpo` is light enough for a trainer's environment (verl-agent's): the credit library, the verl-agent
drop-ins, the batch and the importers need the core dependencies of pyproject.toml alone (and torch for the drop-ins
that take tensors); the pipeline, the environments and the notebooks sit behind the `suite` extra.

Two checks: in this environment, the light modules import and run with every package outside the core's dependency
closure made unimportable (sys.modules poisoning); and in a fresh virtual environment, the package installed with its
core dependencies and the `torch` extra alone (uv, from the package sources pip is configured with: a local index
where there is one) runs the drop-ins, the writer and the importers, and its `scpo` command says in one line that it
needs the suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from helpers import REPO

LIGHT_MODULES = [
    "scpo",
    "scpo.errors",
    "scpo.batch",
    "scpo.credit",
    *sorted(f"scpo.credit.{p.stem}" for p in (REPO / "scpo" / "credit").glob("*.py") if p.stem != "__init__"),
    "scpo.scorers",
    "scpo.scorers.lexical",
    "scpo.integrations.verl_agent",
    "scpo.importers",
    *sorted(f"scpo.importers.{p.stem}" for p in (REPO / "scpo" / "importers").glob("*.py") if p.stem != "__init__"),
]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

# what the light modules are asked to do, in either environment
EXERCISE = textwrap.dedent(
    """
    import json, sys, tempfile
    from pathlib import Path
    from types import SimpleNamespace
    import numpy as np
    for name in MODULES:
        __import__(name)
    from scpo.batch import RolloutBatch
    from scpo.credit import CreditConfig, compute_advantages
    from scpo.credit.synthetic import synthetic_batch
    from scpo.importers.jsonl import steps_to_jsonl
    from scpo.importers.run_import import import_run
    from scpo.importers.verl_agent import mark_rows, write_rollouts

    out = Path(tempfile.mkdtemp())
    batch = synthetic_batch(n_groups=3, group_size=4, max_steps=6, seed=0)
    gigpo = compute_advantages("gigpo", batch, CreditConfig()).advantages
    # the writer on verl-agent's fields, as numpy arrays (tensors are read through .detach().cpu().numpy())
    n = batch.n_rows
    order = np.lexsort((batch.traj_id, batch.step))  # verl's step-major order: trajectories interleave
    nt = {
        "uid": batch.group_uid[order], "traj_uid": batch.traj_uid[order], "anchor_obs": batch.observation[order],
        "rewards": batch.reward[order].astype(object), "episode_rewards": batch.episode_return[order].astype(object),
        "active_masks": np.ones(n, dtype=object), "is_action_valid": batch.valid[order],
    }
    verl = SimpleNamespace(batch={"advantages": np.repeat(gigpo[order, None], 3, 1)}, non_tensor_batch=nt)
    mark_rows(verl)
    path = write_rollouts(verl, 5, out / "verl", env="alfworld")
    back = RolloutBatch.read(path)
    assert back.n_rows == n and back.n_trajectories == batch.n_trajectories
    np.testing.assert_allclose(np.sort(back.trained_advantage), np.sort(gigpo))
    with (out / "steps.jsonl").open("w") as fh:
        steps_to_jsonl(batch, fh, iteration=2)
    summary = import_run(out / "steps.jsonl", out / "imported", progress=False)
    assert summary.iterations == 1 and summary.rows == n
    print(json.dumps({"rows": n}))
    """
)

DROP_INS = textwrap.dedent(
    """
    import numpy as np, torch
    from scpo.credit import compute_advantages
    from scpo.credit.synthetic import synthetic_batch
    from scpo.credit.grouping import discounted_returns
    from scpo.integrations.verl_agent import compute_gigpo_outcome_advantage, compute_scpo_outcome_advantage
    from scpo.scorers import make_scorer
    b = synthetic_batch(n_groups=3, group_size=4, max_steps=6, seed=0)
    order = np.lexsort((b.traj_id, b.step))
    pen = 0.1 * (~b.valid)
    tlr = torch.zeros(b.n_rows, 3, dtype=torch.float64)
    tlr[:, 1] = torch.from_numpy((b.episode_return - pen)[order])
    steps = torch.from_numpy((discounted_returns(b.reward, b.traj_id, b.step, 0.95) - pen)[order])
    mask = torch.ones(b.n_rows, 3)
    args = (tlr, steps, mask, b.observation[order], b.group_uid[order], b.traj_uid[order])
    adv, _ = compute_gigpo_outcome_advantage(*args, mode="mean_std_norm")
    np.testing.assert_allclose(adv[:, 0].numpy(), compute_advantages("gigpo", b).advantages[order], atol=1e-9)
    texts = [f"{a} -> {o}" for a, o in zip(b.action[order], b.next_observation[order])]
    scpo, _ = compute_scpo_outcome_advantage(*args, step_texts=texts, scorer=make_scorer("lexical"))
    assert scpo.shape == (b.n_rows, 3) and torch.isfinite(scpo).all()
    print("drop-ins ok")
    """
)


def _name(dist: str) -> str:
    return dist.lower().replace("_", "-").replace(".", "-")


def core_closure() -> set[str]:
    """The distributions the core dependencies pull in (installed versions' metadata, no extras), normalised names."""
    from importlib import metadata

    todo, seen = [Requirement(r) for r in PROJECT["dependencies"]], set()
    while todo:
        req = todo.pop()
        name = _name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        todo += [Requirement(r) for r in metadata.requires(req.name) or []]
    return seen


def test_the_light_modules_import_and_run_with_everything_outside_the_core_unimportable():
    from importlib import metadata

    allowed = core_closure() | {"scpo"}
    blocked = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if not {_name(d) for d in dists} & allowed and not module.startswith("_")
    )
    assert {"torch", "transformers", "typer", "yaml", "matplotlib", "plotly", "dvc", "alfworld"} <= set(blocked)
    script = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # `import name` now raises ImportError\n"
        f"MODULES = {LIGHT_MODULES!r}\n" + EXERCISE
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["rows"] > 0


def _pip_sources() -> list[str]:
    """uv's arguments for the package sources pip is configured with (index URLs, find-links folders)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    args: list[str] = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        flag = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}
        option = key.rsplit(".", 1)[-1]
        if option in flag:
            for v in value.strip().strip("'\"").split():
                if [flag[option], v] != args[-2:] and v not in args:
                    args += [flag[option], v]
    if "--index-url" not in args and "--extra-index-url" in args:  # pip's extra indexes come after PyPI
        args = ["--index-url", "https://pypi.org/simple", *args]
    return args


@pytest.mark.slow
def test_a_fresh_environment_with_the_core_and_torch_alone_runs_the_drop_ins_the_writer_and_the_importers(tmp_path):
    from importlib import metadata

    uv = Path(sys.executable).parent / "uv"
    assert uv.exists(), "uv comes with the locked environment (requirements/cpu.in): run `make install`"
    # the wheel, built from the package's files alone
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "scpo", src / "scpo", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, src],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, venv], check=True, capture_output=True)
    python = venv / "bin" / "python"
    # the versions of this environment (the lock's): the same numpy, pandas, torch build ...
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{d.metadata['Name']}=={d.version}\n" for d in metadata.distributions()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    install = subprocess.run(
        [uv, "pip", "install", "-q", "--python", python, "--index-strategy", "unsafe-best-match"]
        + [*_pip_sources(), "--find-links", wheels, "-c", constraints, "scpo[torch]"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    installed = json.loads(
        subprocess.run(
            [
                python,
                "-c",
                "import json, importlib.metadata as m; print(json.dumps(sorted(d.metadata['Name'].lower() "
                "for d in m.distributions())))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    print("light install:", ", ".join(installed))
    suite = {_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["suite"]} - {"torch"}
    assert not suite & {_name(n) for n in installed}
    for name in ("typer", "yaml", "transformers", "matplotlib"):
        probe = subprocess.run([python, "-c", f"import {name}"], capture_output=True, text=True)
        assert probe.returncode != 0, f"{name} is installed in the light environment"
    # the `scpo` command says in one line what it needs
    command = subprocess.run([venv / "bin" / "scpo", "--help"], capture_output=True, text=True)
    assert command.returncode == 1
    assert command.stderr.strip().endswith("is not installed: pip install 'scpo[suite]'"), command.stderr
    assert len(command.stderr.strip().splitlines()) == 1
    script = f"MODULES = {LIGHT_MODULES!r}\n" + EXERCISE + DROP_INS
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("drop-ins ok")
