"""Helpers of the run-safety tests: a tiny RL run on the data-free corridor env, through the CLI or the library, and a
fingerprint of a folder to show that a refused command left it byte for byte as it was."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from typer.testing import CliRunner

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


def messages(text: str) -> str:
    """`text` without progress bars (tqdm's redraws: a bar with its percentage, cursor moves, blank redraws), so that
    what remains is the lines a user reads."""
    kept = []
    for raw in re.split(r"[\r\n]", text):
        line = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw).strip()
        if line and not re.search(r"\d+%\|", line):
            kept.append(line)
    return "\n".join(kept)
