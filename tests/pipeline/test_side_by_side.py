"""scpo.pipeline.side_by_side: the commands of one stage (the two SFT warm starts) run at once, a failure stops the
others and is named in one line, output lines carry their command's label."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest

from scpo.pipeline.side_by_side import parse_commands, run_side_by_side


def _rendezvous(tmp_path, me: str, other: str) -> str:
    """Writes its flag, then waits (up to 20 s) for the other's: only commands that run at once both finish."""
    mine, theirs = tmp_path / f"{me}.flag", tmp_path / f"{other}.flag"
    return (
        f"touch {mine}; i=0; while [ ! -e {theirs} ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.1; done; "
        f"echo {me} met {other}"
    )


def test_commands_run_at_once_and_output_carries_labels(tmp_path):
    out = io.StringIO()
    code = run_side_by_side(
        [("alfworld", _rendezvous(tmp_path, "a", "b")), ("webshop", _rendezvous(tmp_path, "b", "a"))], out=out
    )
    assert code == 0, out.getvalue()
    lines = out.getvalue().splitlines()
    assert "[alfworld] a met b" in lines and "[webshop] b met a" in lines


def test_a_failure_stops_the_others_and_is_named(tmp_path):
    out = io.StringIO()
    marker = tmp_path / "slow_finished"
    t0 = time.monotonic()
    code = run_side_by_side(
        [("slow", f"sleep 30; touch {marker}"), ("broken", "echo trying; exit 3")], out=out, poll_s=0.05
    )
    assert code == 3
    assert time.monotonic() - t0 < 20, "the slow command was waited for instead of stopped"
    assert not marker.exists()
    assert out.getvalue().splitlines()[-1] == "side_by_side: broken failed with exit status 3; stopped slow"
    assert "[broken] trying" in out.getvalue()


def test_the_whole_process_group_is_stopped(tmp_path):
    """A command's own children (Papermill's kernel) go with it: the grandchild's marker is never written."""
    marker = tmp_path / "grandchild_finished"
    out = io.StringIO()
    code = run_side_by_side([("parent", f"(sleep 3; touch {marker}) & wait"), ("broken", "exit 1")], out=out)
    assert code == 1
    time.sleep(4)
    assert not marker.exists()


def test_parse_commands_labels_and_errors():
    assert parse_commands(["--label", "a", "echo 1", "echo 2"]) == [("a", "echo 1"), ("2", "echo 2")]
    with pytest.raises(ValueError, match="--label x is not followed by a command"):
        parse_commands(["echo 1", "--label", "x"])
    with pytest.raises(ValueError, match="no command given"):
        parse_commands([])
    with pytest.raises(ValueError, match="labels must differ"):
        run_side_by_side([("a", "true"), ("a", "true")])


def test_command_line_exit_status_and_usage():
    cli = [sys.executable, "-m", "scpo.pipeline.side_by_side"]
    ok = subprocess.run([*cli, "--label", "x", "echo hello", "true"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["[x] hello"]
    bad = subprocess.run([*cli, "--label"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("side_by_side: --label needs a name")
