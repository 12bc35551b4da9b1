"""How notebooks build their Config: scalar Papermill parameters -> the same validated Config as params.yaml."""

from __future__ import annotations

import pytest

from scpo.config import ConfigError
from scpo.pipeline.layout import find_repo_root
from scpo.pipeline.notebook import notebook_config, split_overrides


def test_split_overrides_parses_yaml_values():
    assert split_overrides("credit.scpo.tau=0.8; report.methods=[grpo, scpo] ;") == {
        "credit.scpo.tau": 0.8,
        "report.methods": ["grpo", "scpo"],
    }
    assert split_overrides("") == {} and split_overrides(None) == {}
    with pytest.raises(ConfigError, match="tau"):
        split_overrides("tau")


def test_same_config_from_the_root_and_from_notebooks(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root / "notebooks")
    fixed = {"env.name": "webshop", "train.seed": 2, "train.init_from": "runs/x"}
    cfg, root = notebook_config("params.yaml", "smoke", "credit.scpo.tau=0.8", **fixed)
    assert root == repo_root and find_repo_root() == repo_root
    assert (cfg.profile, cfg.env.name, cfg.train.seed, cfg.credit.scpo.tau) == ("smoke", "webshop", 2, 0.8)
    assert cfg.train.out_dir == str(repo_root / "runs") and cfg.train.init_from == str(repo_root / "runs" / "x")


def test_overrides_are_validated_like_params_yaml(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    with pytest.raises(ConfigError, match="credit.scpo.tau"):
        notebook_config("params.yaml", "smoke", "credit.scpo.tau=1.5")
    with pytest.raises(ConfigError, match="report.nope"):
        notebook_config("params.yaml", "smoke", "report.nope=1")


def test_no_params_file_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="params.yaml"):
        find_repo_root()
