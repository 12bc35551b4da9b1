"""Everyday mistakes end a command with one line naming the value or path (exit 1; 2 for config errors), without a
traceback; `--debug` shows the traceback. A model that is not on this machine is
reported at once (HF_HUB_OFFLINE, or a single question to the Hub), never after five retried downloads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from scpo.data.errors import DataError

from helpers import REPO
from helpers.runs import cli, one_line, train_cli


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
