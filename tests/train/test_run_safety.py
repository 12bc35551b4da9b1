"""Nothing a researcher types destroys what is not a run, mixes two runs or gives a wrong result without a word:
`--overwrite` removes only a run's own entries (never a folder holding anything else, a repository, the current
directory or the data); non-finite numbers are config errors or stop the trainer before it writes them; a resume
refuses another task pool or a retrained start model and repairs a truncated history from its checkpoint; one
evaluation at a time writes into an --out; a sweep refuses a grid value given twice and a folder holding another
sweep."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import REPO
from helpers.notebooks import write_notebook
from helpers.runs import CORRIDOR, CORRIDOR_SETS, cli, fingerprint, messages, one_line, train_cli


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 2-iteration corridor run (copied by each test that aims a command at it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    result = train_cli(out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def run(finished, tmp_path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "run"))


# ---- 1. --overwrite removes only a run folder's own entries


def test_overwrite_refuses_a_folder_holding_two_runs_and_a_notes_file(finished, tmp_path):
    """`--overwrite` of a parent folder holding two runs and a notes file is refused in one line naming them, and
    nothing is removed."""
    parent = tmp_path / "experiments"
    for name in ("grpo", "scpo"):
        shutil.copytree(finished, parent / name)
    (parent / "notes.txt").write_text("what I tried on Tuesday")
    before = fingerprint(parent)
    result = train_cli(parent, "--overwrite", iterations=1)
    assert result.exit_code == 1, result.output
    line = one_line(messages(result.stderr))
    assert line.startswith(f"--overwrite refused: {parent} holds 3 entries that no run writes")
    assert "grpo/ (a run), notes.txt, scpo/ (a run)" in line and "nothing removed" in line
    assert fingerprint(parent) == before


def test_overwrite_refuses_the_current_directory_and_a_folder_above_it(run, monkeypatch):
    """`scpo train --out . --overwrite` is refused: even a folder that holds nothing but a run's entries is refused
    when it is the current directory or holds it."""
    before = fingerprint(run)
    params = ("--params", REPO / "params.yaml")
    monkeypatch.chdir(run)
    result = train_cli(Path("."), *params, "--overwrite", iterations=1)
    assert result.exit_code == 1, result.output
    assert (
        one_line(messages(result.stderr))
        == "--overwrite refused: . is the current directory; nothing removed, choose another --out"
    )
    monkeypatch.chdir(run / "checkpoints")
    result = train_cli(Path(".."), *params, "--overwrite", iterations=1)
    assert result.exit_code == 1, result.output
    assert f"--overwrite refused: .. holds the current directory {run / 'checkpoints'}" in one_line(
        messages(result.stderr)
    )
    assert fingerprint(run) == before


def test_overwrite_refuses_a_repository_and_a_folder_holding_data_root(run):
    before = fingerprint(run)
    result = train_cli(run, "--overwrite", "--set", f"data.root={run / 'dvclive'}", iterations=1)
    assert result.exit_code == 1, result.output
    assert one_line(messages(result.stderr)) == (
        f"--overwrite refused: {run} holds data.root={run / 'dvclive'}; nothing removed, choose another --out"
    )
    (run / ".git").mkdir()
    (run / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = fingerprint(run)
    result = train_cli(run, "--overwrite", iterations=1)
    assert result.exit_code == 1, result.output
    assert one_line(messages(result.stderr)) == (
        f"--overwrite refused: {run} holds a .git (a repository); nothing removed, choose another --out"
    )
    assert fingerprint(run) == before


def test_overwrite_of_a_run_folder_removes_its_own_entries_only_after_every_check(run):
    result = train_cli(run, "--overwrite", "--set", "train.seed=4", iterations=1)
    assert result.exit_code == 0, result.output
    assert json.loads((run / "summary.json").read_text())["seed"] == 4
    assert pd.read_csv(run / "history.csv")["iteration"].tolist() == [0]


def test_a_run_folder_inside_another_run_is_refused(run):
    inner = run / "rollouts" / "again"
    result = train_cli(inner, iterations=1)
    assert result.exit_code == 1, result.output
    assert one_line(messages(result.stderr)) == (
        f"--out {inner} is inside the run folder {run} (replacing that run would remove this one); choose a "
        "folder outside it"
    )
    assert not inner.exists()


# ---- 2. non-finite numbers: config errors, or a stop before anything is written


@pytest.mark.parametrize("value", [".inf", "inf", "-.inf", ".nan", "nan", "1e999"])
def test_non_finite_floats_are_config_errors_naming_the_key(tmp_path, value):
    """`--set train.lr=.inf` (and every other spelling of a non-finite float) is a config error naming the key, before
    anything is trained or checkpointed."""
    result = train_cli(tmp_path / "run", "--set", f"train.lr={value}")
    assert result.exit_code == 2, result.output
    line = one_line(messages(result.stderr))
    assert line.startswith("params.yaml: train.lr = ") and line.endswith("is invalid: Input should be a finite number")
    assert not (tmp_path / "run").exists()


def test_a_non_finite_float_in_a_params_file_is_a_config_error(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text().replace(" tau: 0.9,", " tau: .nan,", 1))
    assert "tau: .nan," in params.read_text()
    result = cli("train", "--params", params, "--profile", "smoke", "--out", tmp_path / "run", *CORRIDOR_SETS)
    assert result.exit_code == 2, result.output
    assert (
        one_line(messages(result.stderr))
        == f"{params}: credit.scpo.tau = nan is invalid: Input should be a finite number"
    )


def _all_finite(folder: Path) -> bool:
    from safetensors.torch import load_file

    files = sorted(folder.rglob("model.safetensors"))
    assert files
    return all(bool(t.isfinite().all()) for f in files for t in load_file(f).values())


def test_a_diverging_run_stops_in_one_line_before_anything_non_finite_is_written(tmp_path):
    """A finite but absurd learning rate: the second update's gradient norm is NaN. The run stops naming the
    iteration; every written checkpoint and history row is finite, and the folder keeps the first checkpoint."""
    out = tmp_path / "run"
    result = train_cli(out, "--set", "train.lr=1e30", iterations=3)
    assert result.exit_code == 1, result.output
    line = one_line(messages(result.stderr))
    assert line.startswith("iteration 1: the gradient norm is nan; stopped before anything of it was written")
    assert "keeps checkpoints/iter_0001" in line and "train.lr (now 1e+30)" in line
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["iter_0001"]
    assert _all_finite(out / "checkpoints")
    history = pd.read_csv(out / "history.csv")
    assert history["iteration"].tolist() == [0] and np.isfinite(history.select_dtypes("number").to_numpy()).all()


def test_a_weight_made_non_finite_stops_the_run_naming_the_iteration(tmp_path, monkeypatch):
    """The weight check: an update that leaves the loss terms finite but a weight NaN (iteration 1)."""
    import torch

    from scpo.train import trainer

    real = trainer.ppo_update
    calls = []

    def corrupting(model, *args, **kwargs):
        out = real(model, *args, **kwargs)
        calls.append(1)
        if len(calls) == 2:
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(trainer, "ppo_update", corrupting)
    out = tmp_path / "run"
    result = train_cli(out, iterations=3)
    assert result.exit_code == 1, result.output
    line = one_line(messages(result.stderr))
    assert line.startswith("iteration 1: the update made weight model.embed_tokens.weight non-finite; stopped before")
    assert _all_finite(out / "checkpoints") and pd.read_csv(out / "history.csv")["iteration"].tolist() == [0]


# ---- 3. a resume refuses another task pool


def _alfworld_run(tmp_path: Path, data: Path, out: Path, *extra: str, iterations: int = 1):
    sets = {**CORRIDOR, "env.name": "alfworld", "env.alfworld.max_steps": 3, "rollout.group_size": 2}
    args = [arg for k, v in sets.items() if not k.startswith("env.corridor") for arg in ("--set", f"{k}={v}")]
    return cli(
        "train",
        "--profile",
        "smoke",
        "--out",
        out,
        *args,
        "--set",
        f"data.root={data}",
        "--set",
        "data.alfworld_require_all=false",
        "--set",
        f"train.iterations={iterations}",
        *extra,
    )


def test_a_resume_with_another_task_pool_is_refused_naming_both(tmp_path, alfworld_games_root):
    """`--resume` with `data.root` pointed at other data: the run records its pool (count, sha256 of the sorted ids),
    and another pool is refused in one line naming both."""
    full, fewer = tmp_path / "full", tmp_path / "fewer"
    shutil.copytree(alfworld_games_root, full / "alfworld")
    shutil.copytree(alfworld_games_root, fewer / "alfworld")
    train = sorted((fewer / "alfworld" / "json_2.1.1" / "train").iterdir())
    shutil.rmtree(train[0])
    out = tmp_path / "run"
    result = _alfworld_run(tmp_path, full, out)
    assert result.exit_code == 0, result.output
    pool = json.loads((out / "provenance.json").read_text())["task_pool"]
    assert pool["count"] == 6 and pool["split"] == "train" and len(pool["sha256"]) == 64
    before = fingerprint(out)
    result = _alfworld_run(tmp_path, fewer, out, "--resume", iterations=2)
    assert result.exit_code == 1, result.output
    line = one_line(messages(result.stderr))
    assert f"--resume of {out} with other inputs than the run's: the task pool (alfworld split 'train')" in line
    assert (
        f"is 5 tasks, sha256 {_pool_digest(fewer)[:12]} now, 6 tasks, sha256 {pool['sha256'][:12]} in the run" in line
    )
    assert fingerprint(out) == before


def _pool_digest(data: Path) -> str:
    from scpo.envs.alfworld import list_tasks
    from scpo.run.inputs import task_pool_record

    return task_pool_record("alfworld", "train", list_tasks("train", data))["sha256"]


def test_a_panel_run_records_its_panel_as_the_task_pool(tmp_path):
    """With `train.panel_size` RL draws from a task panel: provenance records that panel (its count and digest, the
    panel's size and seed), and a panel larger than the training split is one line (exit 2) with nothing written."""
    from scpo.config import load_config
    from scpo.envs.panel import task_panel
    from scpo.envs.registry import env_settings

    out = tmp_path / "run"
    result = train_cli(out, "--set", "train.panel_size=2", "--set", "train.panel_seed=3", iterations=1)
    assert result.exit_code == 0, result.output
    env = env_settings(load_config(REPO / "params.yaml", profile="smoke", overrides=CORRIDOR))
    panel = task_panel(env, 2, 3)
    pool = json.loads((out / "provenance.json").read_text())["task_pool"]
    assert pool["count"] == 2 and pool["panel"] == {"size": 2, "seed": 3} and pool["split"] == env.train_split
    assert pool["sha256"] == hashlib.sha256("\n".join(sorted(panel)).encode()).hexdigest()
    split = env.package.list_tasks(env.train_split, data_root=env.data_root)
    assert pool["sha256"] != hashlib.sha256("\n".join(sorted(split)).encode()).hexdigest()

    big = tmp_path / "big"
    result = train_cli(big, "--set", f"train.panel_size={len(split) + 1}", iterations=1)
    assert result.exit_code == 2, result.output
    assert one_line(messages(result.stderr)) == (
        f"train.panel_size={len(split) + 1} is more than the {len(split)} tasks of corridor's {env.train_split} split"
    )
    assert not big.exists()


# ---- 4. a resume refuses a retrained start model


def test_a_resume_after_the_start_model_was_retrained_is_refused_unless_forced(tmp_path):
    """`--resume` after the init_from SFT folder was retrained (a new start model and KL reference) is refused in one
    line, unless `--force`."""
    sft = tmp_path / "sft"
    result = cli("train", "--profile", "smoke", "--stage", "sft", "--out", sft, *CORRIDOR_SETS)
    assert result.exit_code == 0, result.output
    out = tmp_path / "rl"
    result = train_cli(out, "--set", f"train.init_from={sft}", iterations=1)
    assert result.exit_code == 0, result.output
    start = json.loads((out / "provenance.json").read_text())["start_model"]["policy"]
    assert start["source"] == str((sft / "model").resolve()) and len(start["sha256"]) == 64
    retrain = cli(
        "train",
        "--profile",
        "smoke",
        "--stage",
        "sft",
        "--out",
        sft,
        *CORRIDOR_SETS,
        "--overwrite",
        "--set",
        "train.sft.lr=0.01",
    )
    assert retrain.exit_code == 0, retrain.output
    before = fingerprint(out)
    result = train_cli(out, "--set", f"train.init_from={sft}", "--resume", iterations=2)
    assert result.exit_code == 1, result.output
    line = one_line(messages(result.stderr))
    assert f"the start model {(sft / 'model').resolve()} has sha256 " in line
    assert f"now, {start['sha256'][:12]} when the run started from" in line and "add --force" in line
    assert fingerprint(out) == before
    forced = train_cli(out, "--set", f"train.init_from={sft}", "--resume", "--force", iterations=2)
    assert forced.exit_code == 0, forced.output
    resumes = json.loads((out / "provenance.json").read_text())["resumes"]
    assert any("the start model" in d[2] for d in resumes[-1]["forced_differences"])


# ---- 5. one evaluation at a time into an --out

SLOW_EVAL = """
import sys, time
from scpo.config import load_config
from scpo.envs import corridor
from scpo.train.evaluate import run_evaluation

make_env = corridor.make_env
def slow_make_env(*a, **k):
    env = make_env(*a, **k)
    step = env.step
    def slow_step(action):
        time.sleep(0.05)
        return step(action)
    env.step = slow_step
    return env
corridor.make_env = slow_make_env
cfg = load_config("params.yaml", profile="smoke", overrides={"eval.n_episodes": 4})
run_evaluation(cfg, checkpoint=sys.argv[1], out_dir=sys.argv[2])
"""


def test_a_second_eval_into_the_same_out_is_refused_naming_the_first(finished, tmp_path):
    """Two `scpo eval` into one --out at once: the second is refused in one line naming the first, whose eval.json is
    written whole."""
    out = tmp_path / "eval"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    first = subprocess.Popen(
        [sys.executable, "-c", SLOW_EVAL, str(finished), str(out)], cwd=REPO, env=env, stderr=subprocess.PIPE
    )
    deadline = time.time() + 120
    while not (out / ".scpo.lock").exists() or not (out / ".scpo.lock").read_text():
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        assert time.time() < deadline
        time.sleep(0.05)
    result = cli("eval", "--profile", "smoke", "--checkpoint", finished, "--out", out, "--overwrite")
    assert result.exit_code == 1, result.output
    assert f"run folder {out} is in use by pid {first.pid}" in one_line(messages(result.stderr))
    assert first.wait(timeout=300) == 0, first.stderr.read().decode()[-2000:]
    assert json.loads((out / "eval.json").read_text())["env"] == "corridor"
    assert sorted(os.listdir(out)) == ["eval.csv", "eval.json"]


def test_concurrent_json_writers_never_share_a_temporary_file(tmp_path):
    """Two writers of one file through write_json_atomic: each renames its own temporary file (a shared name would
    make the second rename fail, or move the first writer's half-written file into place)."""
    from scpo.run.provenance import write_json_atomic

    path, errors = tmp_path / "eval.json", []

    def write(tag: int) -> None:
        for i in range(200):
            try:
                write_json_atomic(path, {"writer": tag, "i": i, "pad": "x" * 4000})
            except OSError as err:
                errors.append(err)

    threads = [threading.Thread(target=write, args=(t,)) for t in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(path.read_text())["i"] == 199 and sorted(os.listdir(tmp_path)) == ["eval.json"]


# ---- 6. a resume checks the history against the checkpoint


def test_a_truncated_history_is_rebuilt_from_the_checkpoint_on_resume(run):
    """A truncated history.csv, then --resume: the history is checked against the checkpoint's copy before training
    and rebuilt from it (one line says so), and the resumed run's history, model and summary are complete."""
    original = pd.read_csv(run / "history.csv")
    text = (run / "history.csv").read_text()
    (run / "history.csv").write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])
    result = train_cli(run, "--resume", iterations=3)
    assert result.exit_code == 0, result.output
    assert messages(result.stderr).splitlines() == [
        f"{run / 'history.csv'} differs from the checkpoint's copy in rows 0..1; rebuilt from "
        f"{run / 'checkpoints' / 'iter_0002' / 'history.csv'} (rows 0..1)"
    ]
    history = pd.read_csv(run / "history.csv")
    assert history["iteration"].tolist() == [0, 1, 2]
    pd.testing.assert_frame_equal(history.iloc[:2][original.columns], original, check_dtype=False)
    assert json.loads((run / "summary.json").read_text())["iterations"] == 3


def test_a_damaged_history_without_a_copy_in_the_checkpoint_is_refused_naming_it(run):
    """A checkpoint written before checkpoints kept the history (no copy): a truncated history is refused in one
    line, nothing changed."""
    for ckpt in (run / "checkpoints").iterdir():
        (ckpt / "history.csv").unlink()
        state = json.loads((ckpt / "state.json").read_text())
        del state["files"]["history.csv"]
        (ckpt / "state.json").write_text(json.dumps(state))
    lines = (run / "history.csv").read_text().splitlines()
    (run / "history.csv").write_text("\n".join(lines[:2]) + "\n")  # the header and iteration 0
    before = fingerprint(run)
    result = train_cli(run, "--resume", iterations=3)
    assert result.exit_code == 1, result.output
    assert one_line(messages(result.stderr)) == (
        f"--resume of {run}: {run / 'history.csv'} does not hold rows 0..1 once each (iterations [1] missing), and "
        "checkpoint iter_0002 keeps no copy of it to rebuild it from; restore it from a copy, or start the run "
        "again with --overwrite"
    )
    assert fingerprint(run) == before


# ---- 8, 9. sweeps: a value given twice, a folder holding another sweep


def _notebook(path: Path) -> Path:
    return write_notebook(
        path,
        'x = 1\nout_dir = ""\nsummary_json = ""\noverwrite = False',
        "import json, pathlib\n"
        "pathlib.Path(out_dir).mkdir(parents=True, exist_ok=overwrite)\n"
        "(pathlib.Path(out_dir) / 'run.txt').write_text(str(x))\n"
        "json.dump({'x2': 2 * x}, open(summary_json, 'w'))",
    )


def test_a_grid_value_given_twice_is_refused_before_anything_runs(tmp_path):
    """`--grid x=2,2` (two points that would share one folder and one notebook) is refused before any point runs."""
    notebook = _notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "out"
    result = cli("sweep", notebook, "--grid", "x=2,2", "--out", out)
    assert result.exit_code == 2, result.output
    assert one_line(messages(result.stderr)) == (
        "grid item 'x=2,2' gives the value 2 twice; give each value once (two points would run the same config into "
        "one folder)"
    )
    assert not out.exists()


def test_a_second_sweep_into_a_folder_holding_another_grid_is_refused_unless_overwrite(tmp_path):
    """A second sweep into an --out holding another grid's sweep is refused in one line unless `--overwrite`."""
    notebook = _notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "out"
    first = cli("sweep", notebook, "--grid", "x=2,4", "--out", out)
    assert first.exit_code == 0, first.output
    before = fingerprint(out)
    second = cli("sweep", notebook, "--grid", "x=5", "--out", out)
    assert second.exit_code == 1, second.output
    assert one_line(messages(second.stderr)) == (
        f"sweep folder {out} is not empty, it holds a sweep of another grid (--grid x=2,4); add --overwrite to "
        "replace it, or choose another --out"
    )
    assert fingerprint(out) == before
    replaced = cli("sweep", notebook, "--grid", "x=5", "--out", out, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert pd.read_csv(out / "summary.csv")["x"].tolist() == [5]
    assert sorted(os.listdir(out)) == [
        ".gitignore",
        "summary.csv",
        "summary.md",
        "sweep.json",
        "x-5",
        "x-5.ipynb",
        "x-5.json",
    ]


def test_sweep_overwrite_refuses_a_folder_holding_anything_else(tmp_path, monkeypatch):
    notebook = _notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "out"
    assert cli("sweep", notebook, "--grid", "x=2", "--out", out).exit_code == 0
    (out / "notes.txt").write_text("keep me")
    before = fingerprint(out)
    result = cli("sweep", notebook, "--grid", "x=3", "--out", out, "--overwrite")
    assert result.exit_code == 1, result.output
    assert one_line(messages(result.stderr)) == (
        f"--overwrite refused: {out} holds 1 entry that no sweep writes (notes.txt); nothing removed, choose "
        "another --out, or move them away"
    )
    (out / "notes.txt").unlink()
    before = fingerprint(out)
    monkeypatch.chdir(out / "x-2")
    result = cli("sweep", notebook, "--grid", "x=3", "--out", "..", "--overwrite")
    assert result.exit_code == 1, result.output
    assert one_line(messages(result.stderr)).startswith(
        f"--overwrite refused: .. holds the current directory {out / 'x-2'}"
    )
    assert fingerprint(out) == before


def test_a_separate_kl_reference_is_recorded_and_compared_too(finished, tmp_path):
    """`train.kl_reference: base` from a warm start: the KL reference is the profile's model, another model than the
    start; its digest is recorded beside the start model's and a change to it is named."""
    from scpo.config import load_config
    from scpo.run.inputs import input_differences, start_model_record, start_models

    def record(cfg):
        return start_model_record(*start_models(cfg, tmp_path / "run"))

    warm, base = (Path(shutil.copytree(finished / "model", tmp_path / name)) for name in ("warm", "base"))
    overrides = {**CORRIDOR, "train.init_from": str(warm), "train.kl_reference": "base", "policy.profile": str(base)}
    cfg = load_config("params.yaml", profile="smoke", overrides=overrides)
    saved = {"start_model": record(cfg)}
    assert saved["start_model"]["policy"]["source"] == str(warm.resolve())
    assert saved["start_model"]["kl_reference"]["source"] == str(base.resolve())
    assert input_differences(saved, {"start_model": record(cfg)}) == []
    (base / "config.json").write_text((base / "config.json").read_text() + "\n")
    changed = input_differences(saved, {"start_model": record(cfg)})
    assert len(changed) == 1 and changed[0].startswith(f"the KL reference {base.resolve()} has sha256 ")
    start = load_config("params.yaml", profile="smoke", overrides={**overrides, "train.kl_reference": "start"})
    assert "kl_reference" not in record(start)  # the start model is the reference
