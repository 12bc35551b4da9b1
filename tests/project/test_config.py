"""The typed config: params.yaml validates; bad keys and values fail with the dotted key named."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from scpo.config import ConfigError, apply_overrides, load_config, parse_overrides


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_repo_params_yaml_validates_for_every_profile(repo_root):
    for profile in ("smoke", "cpu", "gpu"):
        cfg = load_config(repo_root / "params.yaml", profile=profile)
        assert cfg.profile == profile
    smoke = load_config(repo_root / "params.yaml", profile="smoke")
    cpu = load_config(repo_root / "params.yaml", profile="cpu")
    # the smoke profile collects fewer rollouts per iteration and trains fewer iterations than the cpu profile
    assert smoke.rollout.n_tasks * smoke.rollout.group_size < cpu.rollout.n_tasks * cpu.rollout.group_size
    assert smoke.train.iterations < cpu.train.iterations
    gpu = load_config(repo_root / "params.yaml", profile="gpu")
    # free-text answers in mixed precision, micro-batched; generation by vLLM (verl-agent's engine), each weight sync
    # checked exactly (scpo.rollout.vllm_engine), the transformers engine the fallback
    assert (gpu.rollout.action_choice, gpu.policy.dtype, gpu.train.micro_batch_size) == ("generate", "bfloat16", 8)
    assert gpu.rollout.engine == "vllm"


@pytest.mark.parametrize("env, prompt_tokens, minibatch", [("alfworld", 2048, 256), ("webshop", 4096, 64)])
def test_gpu_profile_is_verl_agents_gigpo_recipe(repo_root, env, prompt_tokens, minibatch):
    """The rows of the gpu profile's "ours vs verl-agent" table (docs/gpu.md) that are options
    (examples/gigpo_trainer/run_alfworld.sh and run_webshop.sh, verl's ppo_trainer.yaml defaults): per-environment
    prompt budget and minibatch, over-long prompts an error, dual clip c = 3, AdamW weight decay 0.01, zero-advantage
    steps kept, RL from the raw Instruct model, which is also the KL reference, consecutive minibatches."""
    gpu = load_config(repo_root / "params.yaml", profile="gpu", overrides={"env.name": env})
    assert (gpu.policy.max_prompt_tokens, gpu.train.minibatch_size) == (prompt_tokens, minibatch)
    assert (gpu.policy.profile, gpu.policy.max_new_tokens, gpu.policy.prompt_overflow) == (
        "Qwen/Qwen2.5-1.5B-Instruct",
        512,
        "error",
    )
    t = gpu.train
    assert (t.lr, t.kl_coef, t.entropy_coef, t.clip_ratio, t.dual_clip_c, t.weight_decay, t.ppo_epochs) == (
        1e-6,
        0.01,
        0.001,
        0.2,
        3.0,
        0.01,
        1,
    )
    assert (t.skip_zero_advantage, t.rl_start, t.kl_reference, t.minibatch_order, t.iterations) == (
        False,
        "base",
        "start",
        "collected",
        150,
    )
    assert (gpu.rollout.n_tasks, gpu.rollout.group_size, gpu.rollout.temperature, gpu.eval.temperature) == (
        16,
        8,
        1.0,
        0.4,
    )
    assert gpu.credit.for_env(env).norm.scale == {"alfworld": "std", "webshop": "none"}[env]
    # enable_gradient_checkpointing=True; no rollout correction (the actor recomputes old_log_prob); one run per GPU
    assert (t.gradient_checkpointing, t.rollout_correction, gpu.report.parallel_runs) == (True, "none", "per_gpu")
    # the cpu profile keeps its own settings
    cpu = load_config(repo_root / "params.yaml", profile="cpu", overrides={"env.name": env})
    assert (cpu.train.dual_clip_c, cpu.train.weight_decay, cpu.train.rl_start, cpu.policy.prompt_overflow) == (
        None,
        0.0,
        "warm_start",
        "truncate_left",
    )


def test_per_env_values_replace_the_plain_key_only_for_listed_envs(tmp_path):
    p = _write(
        tmp_path,
        """
        env: {name: webshop}
        policy: {max_prompt_tokens: 900, max_prompt_tokens_by_env: {alfworld: 2048}}
        train: {minibatch_size: 32, minibatch_size_by_env: {webshop: 64}}
    """,
    )
    cfg = load_config(p)
    assert (cfg.policy.max_prompt_tokens, cfg.train.minibatch_size) == (900, 64)
    with pytest.raises(ConfigError, match="minibatch_size_by_env"):
        load_config(p, overrides={"train.minibatch_size_by_env": {"nethack": 8}})
    with pytest.raises(ConfigError, match="dual_clip_c"):
        load_config(p, overrides={"train.dual_clip_c": 1.0})


def test_misspelled_key_is_named_with_its_dotted_path(tmp_path):
    p = _write(
        tmp_path,
        """
        train:
          lr: 1.0e-4
          clip_ratoi: 0.2
    """,
    )
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "train.clip_ratoi" in msg
    assert "clip_ratio" in msg  # the allowed keys are listed


def test_negative_learning_rate_is_named_with_value_and_bound(tmp_path):
    p = _write(
        tmp_path,
        """
        train:
          lr: -0.001
    """,
    )
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "train.lr" in msg and "-0.001" in msg and "greater than 0" in msg


def test_wrong_type_and_bad_choice_are_named(tmp_path):
    p = _write(
        tmp_path,
        """
        credit:
          scpo: {tau: "high", reference: longest}
    """,
    )
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "credit.scpo.tau" in msg and "'high'" in msg
    assert "credit.scpo.reference" in msg and "'shortest'" in msg


def test_overrides_go_through_the_same_validation(repo_root):
    cfg = load_config(repo_root / "params.yaml", overrides={"credit.scpo.tau": 0.8, "train.seed": 3})
    assert cfg.credit.scpo.tau == 0.8 and cfg.train.seed == 3
    with pytest.raises(ConfigError, match=r"credit\.scpo\.tau = 1\.5"):
        load_config(repo_root / "params.yaml", overrides={"credit.scpo.tau": 1.5})
    with pytest.raises(ConfigError, match=r"unknown key 'credit\.scpo\.tua'"):
        load_config(repo_root / "params.yaml", overrides={"credit.scpo.tua": 0.5})


def test_greedy_rl_rollouts_are_refused_as_a_group_of_one_is(repo_root):
    """rollout.temperature=0 makes every rollout of a group identical: nothing to compare, as with group_size 1."""
    for key, value, bound in (
        ("rollout.group_size", 1, "greater than or equal to 2"),
        ("rollout.temperature", 0, "greater than 0"),
    ):
        with pytest.raises(ConfigError) as err:
            load_config(repo_root / "params.yaml", overrides={key: value})
        assert str(err.value) == f"{repo_root / 'params.yaml'}: {key} = {value} is invalid: Input should be {bound}"
    assert load_config(repo_root / "params.yaml", overrides={"rollout.temperature": 0.05}).rollout.temperature == 0.05


def test_profile_overrides_apply_before_explicit_overrides(tmp_path):
    p = _write(
        tmp_path,
        """
        profile: smoke
        rollout: {n_tasks: 16}
        profiles:
          smoke: {rollout.n_tasks: 2}
    """,
    )
    assert load_config(p).rollout.n_tasks == 2
    assert load_config(p, profile="cpu").rollout.n_tasks == 16
    assert load_config(p, overrides={"rollout.n_tasks": 5}).rollout.n_tasks == 5


def test_unknown_profile_and_invalid_combination(tmp_path):
    p = _write(tmp_path, "profile: laptop\n")
    with pytest.raises(ConfigError, match="profile = 'laptop'"):
        load_config(p)
    with pytest.raises(ConfigError, match="vllm"):
        load_config(None, overrides={"rollout.engine": "vllm", "policy.profile": "tiny"})


def test_parse_overrides_parses_yaml_values_and_rejects_malformed():
    assert parse_overrides(["a.b=1", "c=[1, 2]", "d=none", "e=text"]) == {
        "a.b": 1,
        "c": [1, 2],
        "d": "none",
        "e": "text",
    }
    with pytest.raises(ConfigError, match="dotted.key=value"):
        parse_overrides(["novalue"])


def test_apply_overrides_does_not_mutate_and_refuses_to_descend_into_values():
    raw = {"train": {"lr": 1.0}}
    out = apply_overrides(raw, {"train.lr": 2.0, "eval.temperature": 0.1})
    assert raw == {"train": {"lr": 1.0}} and out == {"train": {"lr": 2.0}, "eval": {"temperature": 0.1}}
    with pytest.raises(ConfigError, match="'train.lr' is a value"):
        apply_overrides(raw, {"train.lr.x": 1})


def test_params_yaml_lists_every_section(repo_root):
    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    assert {"data", "env", "policy", "rollout", "credit", "train", "eval", "report", "profiles"} <= set(raw)


def _leaves(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


# what the pipeline runs: its own choice in params.yaml (the order its tables show), names the registries check; their
# defaults are the registries' (every registered estimator, and the bounds)
SELECTIONS = ("report.methods", "report.envs", "fidelity.methods", "learning.methods", "learning.envs")


def _run_by_the_pipeline(raw: dict) -> tuple[set[str], set[str]]:
    """(credit methods, environments) params.yaml's pipeline runs, under any of its profiles."""
    from scpo.credit.registry import method_spec

    methods, envs = {raw["credit"]["method"], raw["report"]["credit_map_method"]}, {raw["env"]["name"]}
    for values in [_leaves(raw), *raw["profiles"].values()]:
        for key in ("report.methods", "fidelity.methods", "learning.methods"):
            methods |= set(values.get(key, []))
        for key in ("report.envs", "learning.envs"):
            envs |= set(values.get(key, []))
    return {s for m in methods for s in method_spec(m).sections}, envs


def test_params_yaml_lists_every_default_of_the_config_with_its_value(repo_root):
    """One source of defaults: the config models'. params.yaml lists each default the pipeline runs with (DVC tracks
    params.yaml), with the same value, and nothing the config does not have; the sections of credit methods and
    environments the pipeline does not run may be left out (a new method or environment needs no line there until the
    pipeline runs it). What the pipeline runs (`SELECTIONS`) is its own choice, of registered names."""
    from scpo.config import Config
    from scpo.credit.registry import available_methods
    from scpo.envs.registry import trainable

    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    sections, envs = _run_by_the_pipeline(raw)
    raw.pop("profiles")
    listed, defaults = _leaves(raw), _leaves(Config().model_dump(mode="json"))
    optional = tuple(f"credit.{m}." for m in available_methods() if m not in sections)
    optional += tuple(f"env.{e}." for e in trainable() if e not in envs)
    missing = sorted(k for k in set(defaults) - set(listed) if not k.startswith(optional))
    assert missing == [], "defaults missing from params.yaml"
    assert sorted(set(listed) - set(defaults)) == [], "params.yaml keys the config does not have"
    disagree = {k: v for k, v in listed.items() if v != defaults[k] and k not in SELECTIONS}
    assert disagree == {}, "params.yaml disagrees with the config"
    assert {"alfworld", "webshop"} <= envs and "mc_advantage" not in sections  # the rule leaves these out, no more


def test_the_method_lists_are_the_registrys():
    """The default lists of methods, the CLI's help and `scpo methods` come from the credit registry."""
    from typer.testing import CliRunner

    from scpo.cli import app
    from scpo.config import Config
    from scpo.credit.registry import METHODS, available_methods

    cfg = Config()
    bounds = {m for m, spec in METHODS.items() if spec.bound}
    assert set(cfg.report.methods) == set(available_methods()) - bounds
    policy_values = {"mc_advantage", "exact_advantage"}  # the policy's own values: saved rollouts cannot carry them
    assert set(cfg.learning.methods) == set(cfg.fidelity.methods) == set(available_methods()) - policy_values
    assert {"oracle", "shuffled", *policy_values} <= bounds
    help_text = " ".join(CliRunner().invoke(app, ["train", "--help"], terminal_width=400).stdout.split())
    assert all(m in help_text for m in available_methods())
    listed = CliRunner().invoke(app, ["methods"]).stdout
    assert [line.split(":")[0] for line in listed.splitlines() if not line.startswith(" ")] == list(available_methods())
    assert "reads credit.scpo, credit.gigpo, credit.grpo, credit.norm" in listed


def test_environment_sections_and_names_come_from_the_registry(repo_root):
    from scpo.envs.registry import trainable

    cfg = load_config(repo_root / "params.yaml", overrides={"env.name": "corridor", "env.corridor.max_steps": 3})
    assert set(trainable()) == {"alfworld", "webshop", "corridor", "sokoban"}
    assert cfg.env.corridor.max_steps == 3 and cfg.env.webshop.eval_splits == ("test",)
    with pytest.raises(
        ConfigError, match=r"env\.name = 'webshop-original' .*registered: alfworld, corridor, sokoban, webshop"
    ):
        load_config(repo_root / "params.yaml", overrides={"env.name": "webshop-original"})
    with pytest.raises(ConfigError, match=r"unknown key 'env\.nethack'.*allowed here: name, history_length"):
        load_config(repo_root / "params.yaml", overrides={"env.nethack": {"max_steps": 3}})
    with pytest.raises(ConfigError, match=r"env\.webshop\.eval_splits\.0 = 'valid_seen'"):
        load_config(repo_root / "params.yaml", overrides={"env.webshop.eval_splits": ["valid_seen"]})
    with pytest.raises(ConfigError, match=r"report\.envs = .*unknown environment 'nethack'"):
        load_config(repo_root / "params.yaml", overrides={"report.envs": ["alfworld", "nethack"]})


def test_credit_method_names_come_from_the_credit_registry(repo_root):
    unknown = r"credit\.method = 'scp0' .*unknown credit method 'scp0'; available: exact_advantage, g2po, gigpo"
    with pytest.raises(ConfigError, match=unknown):
        load_config(repo_root / "params.yaml", overrides={"credit.method": "scp0"})
    with pytest.raises(ConfigError, match=r"report\.credit_map_method = 'x'"):
        load_config(repo_root / "params.yaml", overrides={"report.credit_map_method": "x"})


def test_dynamic_sampling_option(repo_root):
    cfg = load_config(repo_root / "params.yaml")
    assert not cfg.rollout.dynamic_sampling.enable and cfg.rollout.dynamic_sampling.max_tries == 10
    on = load_config(repo_root / "params.yaml", overrides={"rollout.dynamic_sampling.enable": True})
    assert on.rollout.dynamic_sampling.enable
    with pytest.raises(ValueError, match="rollout.dynamic_sampling.max_tries"):
        load_config(repo_root / "params.yaml", overrides={"rollout.dynamic_sampling.max_tries": 0})


@pytest.mark.parametrize("key", ["train.iterations", "train.lr", "rollout.n_tasks", "train.checkpoint_every"])
def test_a_boolean_is_no_number(repo_root, key):
    """YAML's `true` where a number belongs is refused naming the key (pydantic alone reads it as 1)."""
    with pytest.raises(ConfigError, match=rf"{re.escape(key)} = True is invalid: a boolean"):
        load_config(repo_root / "params.yaml", profile="smoke", overrides={key: True})


def test_the_sokoban_benchmark_section_trains_every_estimator_it_can_on_ten_paired_seeds_in_the_cpu_profile(repo_root):
    """notebook 09's section: every registered estimator but HCAPO (a language model's hindsight scores), PPO among
    them; the cpu profile's headline on 10 paired seeds (0-9) from the imitation start; smoke smaller in every size;
    a reference the section does not train, or HCAPO, is refused with the key named."""
    from scpo.credit.registry import available_methods

    cpu = load_config(repo_root / "params.yaml", profile="cpu").sokoban
    smoke = load_config(repo_root / "params.yaml", profile="smoke").sokoban
    assert set(cpu.methods) == set(available_methods()) - {"hcapo"} and "ppo" in cpu.methods
    assert (cpu.seeds, cpu.starts, cpu.workers, cpu.out_dir) == (tuple(range(10)), ("imitation",), 2, "runs/sokoban")
    assert cpu.reference_methods == ("grpo", "exact_advantage")
    assert len(smoke.seeds) < len(cpu.seeds) and smoke.warm_iterations < cpu.warm_iterations
    assert smoke.fidelity_batches < cpu.fidelity_batches and smoke.panel_size < cpu.panel_size
    with pytest.raises(ConfigError, match="sokoban.reference_methods"):
        load_config(None, overrides={"sokoban.methods": ["grpo", "gigpo"]})
    with pytest.raises(ConfigError, match="hcapo"):
        load_config(None, overrides={"sokoban.methods": ["grpo", "exact_advantage", "hcapo"]})
