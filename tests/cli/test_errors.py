"""Everyday mistakes end a command with one line naming the value or path (exit 1; 2 for config errors), without a
traceback; `--debug` shows the traceback. A model that is not on this machine is
reported at once (HF_HUB_OFFLINE, or a single question to the Hub), never after five retried downloads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from scpo.data.errors import DataError

from helpers import REPO
from helpers.runs import cli, messages, one_line, train_cli


def test_missing_data_is_one_line_in_a_real_process(tmp_path):
    """The real `scpo` process (typer prints rich tracebacks of 87 lines for this before)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scpo.cli",
            "train",
            "--profile",
            "smoke",
            "--env",
            "alfworld",
            "--out",
            str(tmp_path / "run"),
            "--set",
            f"data.root={tmp_path / 'nodata'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert f"no ALFWorld games under {tmp_path / 'nodata'}" in one_line(proc.stderr)
    assert not (tmp_path / "run").exists()


def test_debug_shows_the_traceback(tmp_path):
    for args in (("--debug", "train"), ("train", "--debug")):
        result = cli(
            *args,
            "--profile",
            "smoke",
            "--env",
            "alfworld",
            "--out",
            tmp_path / "run",
            "--set",
            f"data.root={tmp_path / 'nodata'}",
        )
        assert result.exit_code == 1 and isinstance(result.exception, DataError), args


def test_eval_of_a_missing_checkpoint_is_one_line(tmp_path):
    result = cli("eval", "--profile", "smoke", "--checkpoint", tmp_path / "nothing", "--out", tmp_path / "e")
    assert result.exit_code == 1
    assert f"no model (config.json) at {tmp_path / 'nothing'}" in one_line(result.stderr)
    assert not (tmp_path / "e").exists()


def test_a_corrupt_game_file_is_one_line_naming_it(tmp_path, alfworld_games_root):
    root = tmp_path / "data"
    shutil.copytree(alfworld_games_root, root / "alfworld")
    games = sorted((root / "alfworld" / "json_2.1.1" / "train").glob("*/*/game.tw-pddl"))
    for game in games:  # whichever game the run samples first is cut short
        game.write_text(game.read_text()[:200])
    result = cli(
        "train", "--profile", "smoke", "--env", "alfworld", "--out", tmp_path / "run", "--set", f"data.root={root}"
    )
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert line.startswith("corrupt ALFWorld game file ") and any(str(g) in line for g in games)


def test_an_unknown_model_offline_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    result = train_cli(tmp_path / "run", "--set", "policy.profile=Qwen/Qwen2.5-1.5B-Instrct")
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert "policy.profile='Qwen/Qwen2.5-1.5B-Instrct' is not a local folder and not in the Hugging Face cache" in line
    assert "HF_HUB_OFFLINE is set" in line and not (tmp_path / "run").exists()


def test_an_unreachable_hub_is_asked_once_without_loading_anything(tmp_path, monkeypatch):
    """Online mode, no network: one question to the Hub (no retries), and transformers is never asked to download."""
    import huggingface_hub
    import transformers
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    asked = []

    def unreachable(self, repo_id, **kwargs):
        asked.append(repo_id)
        raise ConnectionError("[Errno -2] Name or service not known")

    def must_not_load(*args, **kwargs):
        raise AssertionError("from_pretrained called: the name should have been checked first")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", must_not_load)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", must_not_load)
    result = train_cli(tmp_path / "run", "--set", "policy.profile=Qwen/Qwen2.5-1.5B-Instrct")
    assert result.exit_code == 1
    assert "the Hub says: ConnectionError: [Errno -2] Name or service not known" in one_line(result.stderr)
    assert asked == ["Qwen/Qwen2.5-1.5B-Instrct"]


def test_a_config_error_is_one_line_with_exit_code_2(tmp_path):
    result = train_cli(tmp_path / "run", "--set", "train.lr=-1")
    assert result.exit_code == 2
    assert "train.lr = -1 is invalid" in one_line(result.stderr)


def test_a_missing_alfworld_source_lists_every_place_looked_without_network(tmp_path, monkeypatch):
    """`prepare-data` with no $ALFWORLD_DATA folder, no shared tarballs and no internet (a stand-in alfworld-download
    that cannot connect): one line naming each place and what to run."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "alfworld-download"
    fake.write_text(f"#!{sys.executable}\nraise ConnectionError('no route to github.com')\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "home"))
    result = cli(
        "prepare-data",
        "--profile",
        "smoke",
        "--only",
        "alfworld",
        "--set",
        f"data.root={tmp_path / 'data'}",
        "--set",
        f"data.shared_dir={tmp_path / 'shared'}",
    )
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert f"$ALFWORLD_DATA={tmp_path / 'home'} (no json_2.1.1/)" in line
    assert f"{tmp_path / 'shared'}/alfworld/{{json_2.1.1-valid.tar.gz" in line
    assert "`alfworld-download --data-dir" in line and "scpo prepare-data --only alfworld" in line


@pytest.mark.parametrize("stage", ["warm", "sft"])
def test_a_bad_stage_is_one_line(tmp_path, stage):
    if stage == "sft":
        result = train_cli(tmp_path / "run", "--stage", "sft", "--resume")
        assert result.exit_code == 2 and "--resume is for RL runs" in one_line(result.stderr)
    else:
        result = train_cli(tmp_path / "run", "--stage", stage)
        assert result.exit_code == 2 and "stage='warm' is invalid; allowed: sft, rl" in one_line(result.stderr)


# ---- config mistakes: one line naming the file, key or value, exit 2, nothing written


def test_a_yaml_syntax_error_in_params_names_the_file_and_line(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("train:\n  lr: 0.001\n  seed: [0, 1\nrollout:\n  n_tasks: 2\n")
    result = cli("train", "--params", params, "--out", tmp_path / "run")
    assert result.exit_code == 2
    line = one_line(result.stderr)
    assert line == f"{params}: YAML syntax error at line 4, column 8: expected ',' or ']', but got ':'"
    assert not (tmp_path / "run").exists()


def test_params_naming_a_folder_or_an_unparsable_set_value_is_one_line(tmp_path):
    result = cli("train", "--params", tmp_path, "--out", tmp_path / "run")
    assert result.exit_code == 2
    assert (
        one_line(result.stderr) == f"--params {tmp_path} is a folder; give a params file such as {tmp_path}/params.yaml"
    )
    result = train_cli(tmp_path / "run", "--set", "report.methods=[grpo, scpo")
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith(
        "override 'report.methods=[grpo, scpo': the value '[grpo, scpo' is not valid YAML (column "
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "override, named",
    [
        ("train.seed=-1", "train.seed = -1 is invalid: Input should be greater than or equal to 0"),
        ("train.sft.n_demos=0", "train.sft.n_demos = 0 is invalid: Input should be greater than or equal to 1"),
        ("train.sft.epochs=0", "train.sft.epochs = 0 is invalid: Input should be greater than or equal to 1"),
        ("rollout.group_size=1", "rollout.group_size = 1 is invalid: Input should be greater than or equal to 2"),
        ("env.name=webshop", "credit.method='oracle' reads the planner's oracle progress, which env.name='webshop'"),
    ],
)
def test_values_that_train_nothing_are_config_errors_before_anything_is_written(tmp_path, override, named):
    """A negative seed crashed in numpy; n_demos / epochs 0 and group_size 1 trained nothing without a word (every
    advantage 0); the oracle on WebShop failed after 10 s of work in 38 lines."""
    extra = ("--set", "credit.method=oracle") if override.startswith("env.name") else ()
    result = train_cli(tmp_path / "run", "--set", override, *extra)
    assert result.exit_code == 2, result.output
    assert named in one_line(result.stderr)
    assert not (tmp_path / "run").exists()


def test_zero_iterations_says_what_it_wrote(tmp_path):
    """`train.iterations=0` is a run whose model/ is its start model; its last line claimed checkpoints it never
    wrote."""
    result = train_cli(tmp_path / "run", iterations=0)
    assert result.exit_code == 0, result.output
    assert "0 iterations (train.iterations=0), no checkpoint; wrote" in result.stdout
    assert (tmp_path / "run" / "model").is_dir() and not (tmp_path / "run" / "checkpoints").exists()


# ---- paths


def test_an_out_that_is_a_file_is_one_line_for_train_eval_and_sweep(tmp_path, repo_root):
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    result = train_cli(file)
    assert result.exit_code == 1 and one_line(result.stderr) == (
        f"--out {file} is a file, not a folder; choose a folder for the run"
    )
    run = tmp_path / "run"
    assert train_cli(run, iterations=1).exit_code == 0
    result = cli("eval", "--profile", "smoke", "--checkpoint", run, "--out", file)
    assert result.exit_code == 1 and one_line(messages(result.stderr)) == (
        f"--out {file} is a file, not a folder; choose a folder for eval.json and eval.csv"
    )
    result = cli("sweep", repo_root / "notebooks" / "02_train.ipynb", "--grid", "method=grpo", "--out", file)
    assert result.exit_code == 1 and one_line(result.stderr) == (
        f"--out {file} is a file, not a folder; choose a folder for the sweep"
    )
    assert file.read_text() == "mine"


def test_an_out_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """A read-only --out (simulated: this suite may run as root, for whom permissions do not apply)."""
    import errno

    real = Path.mkdir

    def read_only(self, *args, **kwargs):
        if tmp_path / "ro" in (self, *self.parents):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    result = train_cli(tmp_path / "ro" / "run")
    assert result.exit_code == 1
    assert one_line(result.stderr) == f"cannot write {tmp_path / 'ro' / 'run'}: Permission denied; choose another --out"


def test_data_root_that_is_a_file_is_one_line(tmp_path):
    file = tmp_path / "data"
    file.write_text("not a folder")
    result = train_cli(tmp_path / "run", "--set", "env.name=alfworld", "--set", f"data.root={file}")
    assert result.exit_code == 1
    assert str(file) in one_line(result.stderr)
    result = cli("prepare-data", "--profile", "smoke", "--set", f"data.root={file}")
    assert result.exit_code == 1
    assert (
        one_line(result.stderr) == f"data.root={file} is a file, not a folder; point data.root at a folder for the data"
    )
    assert not (tmp_path / "run").exists()


def test_a_full_disk_while_training_is_one_line_and_the_run_resumes(tmp_path, monkeypatch):
    """A full disk while a checkpoint is written is one line naming it, the half-written checkpoint is gone, and
    --resume after freeing space continues from the last complete checkpoint."""
    from safetensors import SafetensorError

    from scpo.run import checkpoint

    real, calls = checkpoint.write_training_state, []

    def full_at_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise SafetensorError(  # as safetensors words ENOSPC
                "Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                'message: "No space left on device" })'
            )
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "write_training_state", full_at_second)
    out = tmp_path / "run"
    result = train_cli(out, iterations=3)
    assert result.exit_code == 1
    assert one_line(messages(result.stderr)) == (
        f"no space left writing {out / 'checkpoints' / 'iter_0002'}; free space, then --resume"
    )
    assert sorted(os.listdir(out / "checkpoints")) == ["iter_0001"]  # no half-written iter_0002 left
    monkeypatch.setattr(checkpoint, "write_training_state", real)
    result = train_cli(out, "--resume", iterations=3)
    assert result.exit_code == 0, result.output
    assert pd.read_csv(out / "history.csv")["iteration"].tolist() == [0, 1, 2]


def test_a_full_disk_before_the_first_checkpoint_says_to_start_again(tmp_path, monkeypatch):
    import errno

    from scpo.run import history

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path))

    monkeypatch.setattr(history.HistoryLog, "_write", full)
    out = tmp_path / "run"
    result = train_cli(out, iterations=2)
    assert result.exit_code == 1
    assert one_line(messages(result.stderr)) == (
        f"no space left writing {out / 'history.csv'}; free space, then run it again with --overwrite"
    )


# ---- commands' own inputs


def test_fidelity_input_errors_are_one_line(tmp_path):
    result = cli("fidelity", "--profile", "smoke", "--eps", "abc", "--reports-dir", tmp_path / "r")
    assert result.exit_code == 2
    assert one_line(result.stderr) == "--eps 'abc': 'abc' is not a number; give e.g. --eps 1,2"
    result = cli("fidelity", "--profile", "smoke", "--seeds", "0,x", "--reports-dir", tmp_path / "r")
    assert result.exit_code == 2 and "'x' is not an integer" in one_line(result.stderr)
    result = cli(
        "fidelity", "--profile", "smoke", "--set", f"data.root={tmp_path / 'nodata'}", "--reports-dir", tmp_path / "r"
    )
    assert result.exit_code == 1
    assert f"under {tmp_path / 'nodata'}" in one_line(result.stderr)
    assert not (tmp_path / "r").exists()


def test_fidelity_skips_a_webshop_run_at_an_alfworld_path_with_one_line(tmp_path):
    from scpo.config import load_config
    from scpo.testbeds.fidelity_tables import trained_runs

    runs = tmp_path / "runs" / "alfworld"
    for method, env in (("grpo", "webshop"), ("gigpo", "alfworld")):
        rollouts = runs / method / "seed0" / "rollouts"
        rollouts.mkdir(parents=True)
        (rollouts / "iter_0000.parquet").write_bytes(b"")
        (rollouts.parent / "provenance.json").write_text(json.dumps({"config": {"env": {"name": env}}}))
    overrides = {"train.out_dir": str(tmp_path / "runs"), "report.seeds": [0], "report.methods": ["grpo", "gigpo"]}
    cfg = load_config("params.yaml", overrides=overrides)
    lines = []
    assert trained_runs(cfg, lines.append) == {"gigpo": [runs / "gigpo" / "seed0"]}
    assert lines == [
        f"skipping {runs / 'grpo' / 'seed0'}: a webshop run (credit fidelity reads ALFWorld rollouts, which a "
        "planner labels)"
    ]


def test_credit_map_input_errors_are_one_line(tmp_path, repo_root):
    from scpo.batch import RolloutBatch
    from scpo.credit.synthetic import synthetic_batch

    result = cli("credit-map", tmp_path / "nothing", "--params", repo_root / "params.yaml", "--out", tmp_path / "m.png")
    assert result.exit_code == 1 and one_line(result.stderr) == f"no rollouts folder at {tmp_path / 'nothing'}"
    rollouts = tmp_path / "run" / "rollouts"
    synthetic_batch(n_groups=2, group_size=2, max_steps=4).to_parquet(rollouts / "iter_0000.parquet")
    assert RolloutBatch.read(rollouts / "iter_0000.parquet").n_rows > 0
    for args, expected in (
        (("--iteration", "3"), f"iteration 3 is not saved under {tmp_path / 'run'}; saved: [0]"),
        (("--group", "9"), f"group 9 is not in iteration 0 of {tmp_path / 'run'}; groups: 0..1"),
        (
            ("--out", tmp_path),
            f"--out {tmp_path} is a folder; give the figure's file name, e.g. {tmp_path / 'map.png'}",
        ),
    ):
        result = cli(
            "credit-map", tmp_path / "run", "--params", repo_root / "params.yaml", "--out", tmp_path / "m.png", *args
        )
        assert result.exit_code in (1, 2) and one_line(result.stderr) == expected, result.output


def test_a_resume_with_other_code_says_so_in_one_line(tmp_path):
    out = tmp_path / "run"
    assert train_cli(out, iterations=1).exit_code == 0
    state = out / "checkpoints" / "iter_0001" / "state.json"
    data = json.loads(state.read_text())
    data["provenance"]["git"] = {"commit": "0123456789abcdef", "dirty": False}
    state.write_text(json.dumps(data))
    result = train_cli(out, "--resume", iterations=2)
    assert result.exit_code == 0, result.output
    notes = messages(result.stderr).splitlines()
    assert len(notes) == 1 and notes[0].startswith("note: resuming with other code than the run's: commit ")
    assert notes[0].endswith(", 0123456789 at its checkpoint")


def test_an_expected_error_in_a_notebook_shows_as_its_one_line():
    """IPython shows an ExpectedError through `_render_traceback_`: Papermill's error output and the executed
    notebook carry the one line, not a traceback."""
    from scpo.config import ConfigError

    err = ConfigError("params.yaml: train.lr = -1 is invalid: Input should be greater than 0")
    assert err._render_traceback_() == [
        "ConfigError: params.yaml: train.lr = -1 is invalid: Input should be greater than 0"
    ]


def test_scpo_config_validates_values_before_dvc_writes_them(tmp_path):
    """`dvc exp run -S train.lr=-1` writes the value into params.yaml before a stage fails on it; `scpo config`
    checks values first, writing nothing."""
    before = (REPO / "params.yaml").read_text()
    result = cli("config", "--params", REPO / "params.yaml", "--set", "train.lr=-1")
    assert result.exit_code == 2
    assert (
        one_line(result.stderr) == f"{REPO / 'params.yaml'}: train.lr = -1 is invalid: Input should be greater than 0"
    )
    result = cli("config", "--params", REPO / "params.yaml", "--profile", "smoke", "--set", "credit.scpo.tau=0.8")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"{REPO / 'params.yaml'}: valid with profile smoke; credit.scpo.tau=0.8"
    assert (REPO / "params.yaml").read_text() == before


def test_credit_map_of_a_group_with_nothing_to_tell_apart_says_so(tmp_path, repo_root):
    """Every sibling lost with equal rewards: every advantage is 0; one line instead of a figure of zeros. A suffix
    matplotlib cannot write is refused before any work."""
    import pandas as pd

    from scpo.credit.synthetic import synthetic_batch

    rollouts = tmp_path / "run" / "rollouts"
    synthetic_batch(n_groups=2, group_size=3, max_steps=4).to_parquet(rollouts / "iter_0000.parquet")
    frame = pd.read_parquet(rollouts / "iter_0000.parquet")
    frame["reward"], frame["won"], frame["valid"] = 0.0, False, True
    frame.to_parquet(rollouts / "iter_0000.parquet")
    figure = tmp_path / "m.png"
    result = cli("credit-map", tmp_path / "run", "--params", repo_root / "params.yaml", "--out", figure,
                 "--set", "report.methods=[grpo,gigpo,scpo,rloo]")  # fmt: skip
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert line.startswith("every advantage is 0 on group ") and "all lost" in line, line
    assert "no saved iteration of" in line and not figure.exists()
    result = cli("credit-map", tmp_path / "run", "--params", repo_root / "params.yaml", "--out", figure)
    assert result.exit_code == 0 and figure.exists()  # ProGPO-C's progress baseline gives credit within the group
    assert "has no won and lost siblings" in result.stderr, result.stderr
    result = cli("credit-map", tmp_path / "run", "--params", repo_root / "params.yaml", "--out", tmp_path / "x.txt")
    assert result.exit_code == 2 and "--out" in one_line(result.stderr) and ".png" in one_line(result.stderr)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--split", "valid_sen"), "--split 'valid_sen' is not an ALFWorld split"),
        (("--games", "0"), "--games 0: allowed: an integer >= 1"),
        (("--games", "-3"), "--games -3: allowed: an integer >= 1"),
        (("--data-root", "{tmp}/no-data"), "no ALFWorld games under {tmp}/no-data"),
        (("--games", "1", "--out", "{tmp}"), "--out {tmp} is a folder"),
    ],
    ids=["split", "zero", "negative", "no-data", "folder"],
)
def test_parity_mistakes_are_one_line_before_any_game(tmp_path, args, expected):
    result = cli("parity", *(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code in (1, 2), result.output
    assert one_line(result.stderr).startswith(expected.format(tmp=tmp_path)), result.stderr
    assert "identical" not in result.output
