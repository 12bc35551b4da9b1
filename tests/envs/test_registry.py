"""The one environment registry: every entry's spec, the package contract, `env_settings` read from each env's own
options (no per-environment branch), and the corridor test env as a registered environment of its own."""

from __future__ import annotations

import pytest

import scpo.envs
from scpo.config import load_config
from scpo.envs.base import CONTRACT
from scpo.envs.registry import ENVIRONMENTS, env_package, env_settings, env_spec, trainable


def test_every_entry_declares_a_spec_with_its_own_name_and_a_complete_package():
    assert set(ENVIRONMENTS) == {"alfworld", "webshop", "webshop-original", "corridor", "sokoban"}
    for name in ENVIRONMENTS:
        spec = env_spec(name)
        assert spec.name == name and callable(spec.factory)
        if spec.trainable:
            package = env_package(name)
            assert all(callable(getattr(package, f)) for f in CONTRACT)
            assert spec.options().max_steps >= 1
    assert CONTRACT == ("list_tasks", "make_env", "task_type", "expert_actions", "build_prompt", "project_action")
    assert "webshop-original" not in trainable()


def test_unknown_names_list_the_registry():
    with pytest.raises(
        KeyError, match="unknown environment 'nethack'; available: alfworld, corridor, sokoban, webshop"
    ):
        scpo.envs.make("nethack")
    with pytest.raises(KeyError, match="no package to train on"):
        env_package("webshop-original")


@pytest.mark.parametrize(
    ("name", "max_steps", "train", "evaluation", "options"),
    [
        # the cpu profile: 15 steps
        ("alfworld", 15, "train", ("valid_seen", "valid_unseen"), {"engine": "fast", "reveal_goal_objects": False}),
        ("webshop", 15, "train", ("test",), {}),
        ("corridor", 10, "train", ("valid_seen", "valid_unseen"), {}),
        ("sokoban", 15, "train", ("valid_seen", "valid_unseen"), {"reward": "success"}),
    ],
)
def test_settings_come_from_the_environments_own_section(repo_root, name, max_steps, train, evaluation, options):
    cfg = load_config(repo_root / "params.yaml", profile="cpu", overrides={"env.name": name})
    env = env_settings(cfg)
    assert (env.name, env.max_steps, env.train_split, env.eval_splits, env.options) == (
        name,
        max_steps,
        train,
        evaluation,
        options,
    )
    assert env.package is env_package(name)


def test_options_other_than_the_defaults_reach_the_settings(repo_root):
    cfg = load_config(
        repo_root / "params.yaml",
        overrides={
            "env.name": "alfworld",
            "env.alfworld.engine": "textworld",
            "env.alfworld.max_steps": 7,
            "env.alfworld.train_split": "valid_train",
            "env.alfworld.eval_splits": ["valid_unseen"],
            "env.alfworld.reveal_goal_objects": True,
        },
    )
    env = env_settings(cfg)
    assert (env.max_steps, env.train_split, env.eval_splits, env.options) == (
        7,
        "valid_train",
        ("valid_unseen",),
        {"engine": "textworld", "reveal_goal_objects": True},
    )


def test_the_corridor_is_built_by_make_like_any_environment():
    env = scpo.envs.make("corridor", task_id="corridor-walk-2-0-0")
    obs, info = env.reset()
    assert obs == "You are in room 0 of 2." and info["admissible_commands"] == ["look", "go east"]
    assert env.step("go east")[0] == "You are in room 1 of 2. A door is to the east."
    assert env.step("open door")[1:3] == (10.0, True)
