"""Helpers of the run-safety tests: a tiny RL run on the data-free corridor env, through the CLI, the library or a
separate process with slowed env steps (to stop or race it mid-iteration), a run's history without its timings, and a
fingerprint of a folder to show that a refused command left it byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from helpers import REPO

# a 0.05M-parameter policy on the corridor env: an iteration takes well under a second
CORRIDOR = {
    "policy.tiny_hidden_size": 32,
    "policy.tiny_layers": 1,
    "policy.tiny_heads": 2,
    "policy.tiny_vocab_size": 300,
    "policy.max_new_tokens": 8,
    "env.name": "corridor",
    "env.corridor.max_steps": 4,
    "rollout.n_tasks": 2,
    "rollout.group_size": 3,
    "train.checkpoint_every": 1,
    "train.lr": 1e-3,
    "credit.method": "gigpo",
    "rollout.action_choice": "generate",
    "train.skip_zero_advantage": False,
}
CORRIDOR_SETS = [arg for k, v in CORRIDOR.items() for arg in ("--set", f"{k}={v}")]


def cli(*args: str):
    """`scpo ARGS` in this process (typer's CliRunner): the result has exit_code, stdout, stderr."""
    from scpo.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def train_cli(out: Path, *extra: str, iterations: int = 2):
    return cli(
        "train", "--profile", "smoke", "--out", out, *CORRIDOR_SETS, "--set", f"train.iterations={iterations}", *extra
    )


def fingerprint(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under `folder` ({} if it does not exist)."""
    folder = Path(folder)
    return (
        {
            p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        if folder.exists()
        else {}
    )


def one_line(text: str) -> str:
    """The text's only non-empty line (AssertionError showing the text when there are more or none)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    return lines[0]


# `scpo train --stage rl` in a process of its own, every corridor env step slowed by `sleep` seconds
_SLOW_CORRIDOR_RUN = """
import json, sys, time
from scpo.config import load_config
from scpo.envs import corridor
from scpo.train.run import run_training

out, overrides, sleep, resume = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "resume"
make_env = corridor.make_env
def slow_make_env(*a, **k):
    env = make_env(*a, **k)
    step = env.step
    def slow_step(action):
        time.sleep(sleep)
        return step(action)
    env.step = slow_step
    return env
corridor.make_env = slow_make_env
run_training(load_config("params.yaml", profile="smoke", overrides=overrides), stage="rl", out_dir=out, resume=resume)
"""


def slow_corridor_run(out: Path, overrides: dict, *, sleep: float = 0.0, resume: bool = False) -> subprocess.Popen:
    """An RL run on the corridor env (smoke profile + `overrides`) into `out`, in a new process whose env steps each
    sleep `sleep` seconds; stderr is piped, stdout dropped."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    args = [str(out), json.dumps(overrides), str(sleep), "resume" if resume else "fresh"]
    return subprocess.Popen(
        [sys.executable, "-c", _SLOW_CORRIDOR_RUN, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def comparable_history(run: Path) -> pd.DataFrame:
    """A run's history.csv without its timing columns (perf/*, but the step and token counts): what must equal
    between two runs of one config."""
    hist = pd.read_csv(Path(run) / "history.csv")
    return hist[[c for c in hist.columns if not c.startswith("perf/") or c in ("perf/steps", "perf/response_tokens")]]


def messages(text: str) -> str:
    """`text` without progress bars (tqdm's redraws: a bar with its percentage, cursor moves, blank redraws), so that
    what remains is the lines a user reads."""
    kept = []
    for raw in re.split(r"[\r\n]", text):
        line = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw).strip()
        if line and not re.search(r"\d+%\|", line):
            kept.append(line)
    return "\n".join(kept)
