"""Data provenance: each run's provenance.json and each eval.json record a digest of the prepared data they used (the
ALFWorld game files, the WebShop catalogue, a generated environment's task ids), so two catalogues or game sets are
told apart; a resume on data rebuilt underneath the run is refused like one on another task pool."""

from __future__ import annotations

import json

from scpo.config import load_config
from scpo.envs.registry import env_settings
from scpo.envs.webshop.catalogue import build_catalogue
from scpo.run.inputs import task_list

from helpers import REPO
from helpers.runs import CORRIDOR_SETS, cli, train_cli


def _webshop_record(raw, root, seed):
    from scpo.run.inputs import data_record

    build_catalogue(raw, root / "webshop", n_products=60, n_goals=30, seed=seed)
    cfg = load_config(REPO / "params.yaml", profile="smoke", overrides={"env.name": "webshop", "data.root": str(root)})
    env = env_settings(cfg)
    return data_record(env, task_list(env, "test"))


def test_a_webshop_catalogue_rebuilt_otherwise_has_another_digest(webshop_sample_dir, tmp_path):
    from scpo.run.inputs import input_differences

    first = _webshop_record(webshop_sample_dir, tmp_path / "a", seed=0)
    again = _webshop_record(webshop_sample_dir, tmp_path / "b", seed=0)
    other = _webshop_record(webshop_sample_dir, tmp_path / "c", seed=1)
    assert first["kind"] == "webshop catalogue" and first["built"]["seed"] == 0 and first["built"]["n_products"] == 60
    assert first["sha256"] == again["sha256"] != other["sha256"]
    differences = input_differences({"data": first}, {"data": other})
    assert len(differences) == 1 and differences[0].startswith("the prepared data (webshop catalogue) has sha256 ")


def test_alfworld_game_files_are_digested_by_content(tmp_path, repo_root):
    import shutil

    from scpo.run.inputs import data_record

    root = tmp_path / "data"
    shutil.copytree(repo_root / "tests" / "fixtures" / "alfworld", root / "alfworld")
    cfg = load_config(REPO / "params.yaml", profile="smoke", overrides={"data.root": str(root)})
    env = env_settings(cfg)
    tasks = task_list(env, "valid_seen")
    before = data_record(env, tasks)
    game = next((root / "alfworld" / "json_2.1.1" / tasks[0]).glob("game.tw-pddl"))
    game.write_text(game.read_text().replace('"', "'", 1))  # one character of one game changed
    after = data_record(env, tasks)
    assert before["kind"] == "alfworld game files" and before["count"] == len(tasks)
    assert before["sha256"] != after["sha256"]


def test_a_run_and_its_evaluation_record_the_data(tmp_path):
    run = tmp_path / "run"
    assert train_cli(run, iterations=1).exit_code == 0
    record = json.loads((run / "provenance.json").read_text())["data"]
    assert record["kind"].startswith("generated") and len(record["sha256"]) == 64
    result = cli("eval", "--profile", "smoke", "--checkpoint", run, "--out", tmp_path / "eval", *CORRIDOR_SETS)
    assert result.exit_code == 0, result.output
    splits = json.loads((tmp_path / "eval" / "eval.json").read_text())["splits"]
    assert all(len(s["data"]["sha256"]) == 64 and s["data"]["count"] >= 1 for s in splits.values())
