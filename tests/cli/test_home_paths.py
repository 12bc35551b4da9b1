"""`--out=~/x` (the shell expands no `~` after `=`) and a quoted "~/x" name the home folder, not a folder literally
named `~` in the current one (issue 59: a later `rm -rf ~` of that folder would wipe the home folder)."""

from __future__ import annotations

from helpers import REPO
from helpers.runs import cli


def test_a_tilde_in_a_path_option_is_the_home_folder(tmp_path, monkeypatch):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    params = f"--params={REPO / 'params.yaml'}"
    resumed = cli("train", params, "--profile", "smoke", "--out=~/run", "--resume")
    assert resumed.exit_code == 1
    assert resumed.stderr.startswith(f"nothing to resume in {home / 'run'}: "), resumed.stderr
    evaluated = cli("eval", params, "--checkpoint=~/run", "--out=~/evals")
    assert evaluated.exit_code == 1
    assert f"no model (config.json) at {home / 'run'} " in evaluated.stderr, evaluated.stderr
    assert list(work.iterdir()) == []
