"""The learning benchmark's runs: which (env, label, seed) it trains and the config each run gets, variants included."""

from __future__ import annotations

import pytest

from scpo.config import LEARNING_RUN_SETTINGS, load_config
from scpo.testbeds.learning import labels, pairing_settings, run_config, run_keys, run_learning

OUTCOME = {"credit.method": "oracle", "credit.oracle.episode_weight": 1.0}


def _cfg(repo_root, **learning):
    overrides = {"learning.methods": ["grpo", "oracle"], "learning.reference_methods": ["grpo"]}
    overrides.update({f"learning.{k}": v for k, v in learning.items()})
    return load_config(repo_root / "params.yaml", profile="cpu", overrides=overrides)


def _dotted(cfg, key: str):
    value = cfg.model_dump(mode="json")
    for part in key.split("."):
        value = value[part]
    return value


def test_runs_are_the_methods_then_dynamic_sampling_then_the_variants_seeds_innermost(repo_root):
    cfg = _cfg(
        repo_root,
        envs=["alfworld", "webshop"],
        seeds=[3, 7],
        dynamic_sampling=["grpo"],
        variants={"oracle+outcome": OUTCOME},
    )
    assert labels(cfg) == {"grpo": "grpo", "oracle": "oracle", "grpo+ds": "grpo", "oracle+outcome": "oracle"}
    keys = run_keys(cfg)
    alfworld = [(k.method, k.seed) for k in keys if k.env == "alfworld"]
    assert alfworld == [(m, s) for m in ("grpo", "oracle", "grpo+ds", "oracle+outcome") for s in (3, 7)]
    # WebShop has no planner: the oracle and its variant are left out there, the rest run
    webshop = [(k.method, k.seed) for k in keys if k.env == "webshop"]
    assert webshop == [(m, s) for m in ("grpo", "grpo+ds") for s in (3, 7)]


def test_a_variant_gets_its_overrides_and_the_same_pairing_settings_as_every_run(repo_root):
    cfg = _cfg(repo_root, variants={"oracle+outcome": OUTCOME}, dynamic_sampling=["grpo"])
    runs = {k.method: run_config(cfg, k, "/warm/start") for k in run_keys(cfg) if k.seed == 1}
    variant = runs["oracle+outcome"]
    assert variant.credit.method == "oracle" and variant.credit.oracle.episode_weight == 1.0
    assert runs["oracle"].credit.oracle.episode_weight == 0.0  # the plain oracle keeps the default
    assert runs["grpo+ds"].rollout.dynamic_sampling.enable and not variant.rollout.dynamic_sampling.enable
    for key in LEARNING_RUN_SETTINGS:  # what pairs the runs is the same for every label of a seed
        assert len({repr(_dotted(c, key)) for c in runs.values()}) == 1, key
    assert variant.train.seed == 1 and variant.train.init_from == "/warm/start"
    assert variant.train.iterations == cfg.learning.iterations and variant.rollout.n_tasks == cfg.learning.n_tasks


@pytest.mark.parametrize(
    "variants, message",
    [
        ({"grpo": OUTCOME}, "the label must be new"),
        ({"grpo+ds": OUTCOME}, "the label must be new"),
        ({"no-method": {"credit.oracle.episode_weight": 1.0}}, "names no credit.method"),
        ({"unknown": {"credit.method": "nosuch"}}, "nosuch"),
        ({"reseeded": {**OUTCOME, "train.seed": 5}}, r"overrides \['train.seed'\]"),
        ({"longer": {**OUTCOME, "train.iterations": 20, "rollout.n_tasks": 8}}, "rollout.n_tasks', 'train.iterations"),
    ],
)
def test_a_variant_that_is_not_a_new_label_or_breaks_the_pairing_is_refused(repo_root, variants, message):
    with pytest.raises(ValueError, match=message):
        _cfg(repo_root, variants=variants)


def test_a_variant_with_an_unknown_key_fails_before_any_run_starts(repo_root, tmp_path):
    typo = {"credit.method": "oracle", "credit.oracle.episode_wieght": 1.0}
    cfg = _cfg(repo_root, variants={"typo": typo}, out_dir=str(tmp_path / "runs"))
    with pytest.raises(ValueError, match="episode_wieght"):
        run_learning(cfg, {"alfworld": tmp_path / "warm"}, workers=1, progress=False)
    assert not (tmp_path / "runs").exists()  # not even the plain methods' runs started


def test_the_pairing_settings_are_exactly_the_ones_no_variant_may_change(repo_root):
    """One list (scpo.config.LEARNING_RUN_SETTINGS) says what pairs the runs; run_config sets exactly those, last."""
    cfg = _cfg(repo_root, variants={"oracle+outcome": OUTCOME})
    key = next(k for k in run_keys(cfg) if k.method == "oracle+outcome")
    settings = pairing_settings(cfg, key, "/warm/start")
    assert tuple(settings) == LEARNING_RUN_SETTINGS
    run = run_config(cfg, key, "/warm/start")
    assert {k: _dotted(run, k) for k in settings} == settings


def test_fidelity_on_own_rollouts_leaves_out_the_estimators_only_training_can_label(repo_root, monkeypatch):
    """mc_advantage needs Monte-Carlo values that only its own training played: the fidelity of the runs' rollouts is
    computed for the others (a GRPO run's rollouts carry no policy_value)."""
    import pandas as pd

    import scpo.testbeds.fidelity as fidelity
    from scpo.testbeds.learning import own_rollouts_fidelity

    seen = {}

    def fake(cfg, runs, *, methods, iterations, progress):
        seen["methods"] = list(methods)
        summary = pd.DataFrame({"kind": ["all"] * len(methods), "estimator": methods, "auc_mean": [0.5] * len(methods)})
        return type("R", (), {"summary": summary})()

    monkeypatch.setattr(fidelity, "trained_fidelity", fake)
    cfg = _cfg(repo_root, methods=["grpo", "mc_advantage", "oracle"])
    results = [{"env": "alfworld", "method": m, "seed": 0} for m in ("grpo", "mc_advantage", "oracle")]
    assert own_rollouts_fidelity(cfg, results) == {"grpo": 0.5, "oracle": 0.5}
    assert seen["methods"] == ["grpo", "oracle"]


def test_fidelity_on_own_rollouts_reads_only_the_fidelity_environments_runs(repo_root, monkeypatch):
    """The fidelity sources label ALFWorld rollouts (`FIDELITY_ENVS`): corridor runs get no score, and beside ALFWorld
    runs only the ALFWorld folders are read."""
    import pandas as pd

    import scpo.testbeds.fidelity as fidelity
    from scpo.testbeds.learning import own_rollouts_fidelity

    seen = {}

    def fake(cfg, runs, *, methods, iterations, progress):
        seen["runs"] = {m: [str(p) for p in folders] for m, folders in runs.items()}
        summary = pd.DataFrame({"kind": ["all"] * len(methods), "estimator": methods, "auc_mean": [0.5] * len(methods)})
        return type("R", (), {"summary": summary})()

    monkeypatch.setattr(fidelity, "trained_fidelity", fake)
    cfg = _cfg(repo_root, methods=["grpo"])
    assert own_rollouts_fidelity(cfg, [{"env": "corridor", "method": "grpo", "seed": 0}]) == {}
    assert "runs" not in seen
    results = [{"env": e, "method": "grpo", "seed": 0} for e in ("corridor", "alfworld")]
    assert own_rollouts_fidelity(cfg, results) == {"grpo": 0.5}
    assert len(seen["runs"]["grpo"]) == 1 and "/alfworld/" in seen["runs"]["grpo"][0]
