"""`scpo.credit.estimate` and `compute_advantages`: the one way to run estimators on a batch (trainer, analyses,
testbeds, explorer): the environment read from the batch, each method's needs from its registry spec, the same checks
for one method and for several."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, compute_advantages, estimate, unmet_need
from scpo.credit.synthetic import synthetic_batch
from scpo.envs.registry import with_oracle_progress


def _as_env(batch: RolloutBatch, env: str) -> RolloutBatch:
    cols = batch.columns()
    cols["env_name"] = np.array([env] * batch.n_rows, dtype=object)
    return RolloutBatch(**cols)


def test_the_batch_environment_picks_the_reference_scale():
    base = synthetic_batch(n_groups=4, group_size=4, max_steps=6, seed=1)
    cfg = CreditConfig()
    assert cfg.norm.scale_by_env == {"alfworld": "std", "webshop": "none"}
    alf = estimate(_as_env(base, "alfworld"), ["gigpo"], cfg)["gigpo"].advantages
    web = estimate(_as_env(base, "webshop"), ["gigpo"], cfg)["gigpo"].advantages
    np.testing.assert_array_equal(alf, compute_advantages("gigpo", base, cfg, scale="std").advantages)
    np.testing.assert_array_equal(web, compute_advantages("gigpo", base, cfg, scale="none").advantages)
    assert not np.allclose(alf, web)
    # an explicit option still wins over the environment's scale
    np.testing.assert_array_equal(
        compute_advantages("gigpo", _as_env(base, "webshop"), cfg, scale="std").advantages,
        compute_advantages("gigpo", base, cfg, scale="std").advantages,
    )


def test_a_method_whose_need_is_unmet_raises_one_line_or_is_skipped():
    batch = synthetic_batch(n_groups=2, group_size=4, max_steps=5, seed=2)
    with pytest.raises(ValueError, match=r"^credit method 'hcapo' needs the policy's hindsight scores"):
        estimate(batch, ["grpo", "hcapo"])
    with pytest.raises(ValueError, match=r"^credit method 'oracle' needs the planner's oracle progress"):
        estimate(batch, ["oracle"])
    assert list(estimate(batch, ["grpo", "hcapo", "oracle", "gigpo"], unmet="skip")) == ["grpo", "gigpo"]
    assert unmet_need("grpo", batch) is None
    with pytest.raises(ValueError, match="unmet='ignore'"):
        estimate(batch, ["grpo"], unmet="ignore")
    # one method goes through the same checks, with the same message
    for method, need in (("hcapo", "the policy's hindsight scores"), ("oracle", "the planner's oracle progress")):
        with pytest.raises(ValueError, match=rf"^credit method '{method}' needs {need}"):
            compute_advantages(method, batch)


def test_a_scorer_given_by_name_is_the_methods_scorer_option_and_not_also_an_object():
    batch = synthetic_batch(n_groups=3, group_size=4, max_steps=6, seed=6)
    by_name = compute_advantages("scpo", batch, scorer="lexical", tau=0.5).advantages
    np.testing.assert_array_equal(by_name, compute_advantages("scpo", batch, tau=0.5).advantages)
    np.testing.assert_array_equal(by_name, estimate(batch, ["scpo"], options={"scpo": {"tau": 0.5}})["scpo"].advantages)
    with pytest.raises(ValueError, match="a scorer object and the scorer option 'lexical'"):
        estimate(batch, ["scpo"], scorer=object(), options={"scpo": {"scorer": "lexical"}})
    with pytest.raises(ValueError, match="the scorer 'lexical' and the scorer option too"):
        estimate(batch, ["scpo"], scorer="lexical", options={"scpo": {"scorer": "lexical"}})


def test_given_needs_are_used():
    batch = synthetic_batch(n_groups=2, group_size=4, max_steps=5, seed=3)
    scores = -np.linspace(0.5, 2.0, batch.n_rows)
    got = estimate(batch, ["hcapo"], hindsight_logprob=scores)["hcapo"].advantages
    np.testing.assert_array_equal(got, compute_advantages("hcapo", batch, hindsight_logprob=scores).advantages)
    cols = batch.columns()
    cols["oracle_progress"] = np.where(np.arange(batch.n_rows) % 3 == 0, 1.0, 0.0)
    labelled = RolloutBatch(**cols)
    np.testing.assert_array_equal(
        estimate(labelled, ["oracle"])["oracle"].advantages, compute_advantages("oracle", labelled).advantages
    )


def test_options_reach_only_the_methods_that_read_their_section():
    batch = synthetic_batch(n_groups=4, group_size=4, max_steps=6, seed=4)
    plain = estimate(batch, ["gigpo", "scpo"])
    tuned = estimate(batch, ["gigpo", "scpo"], options={"scpo": {"tau": 0.5, "kappa": 0.5}})
    np.testing.assert_array_equal(plain["gigpo"].advantages, tuned["gigpo"].advantages)
    np.testing.assert_array_equal(
        tuned["scpo"].advantages, compute_advantages("scpo", batch, tau=0.5, kappa=0.5).advantages
    )
    assert not np.array_equal(plain["scpo"].advantages, tuned["scpo"].advantages)
    lexical = estimate(batch, ["scpo"], options={"scpo": {"scorer": "lexical"}})["scpo"]
    np.testing.assert_array_equal(lexical.advantages, plain["scpo"].advantages)


def test_oracle_labels_come_from_the_environment_that_declares_a_planner():
    batch = _as_env(synthetic_batch(n_groups=1, group_size=2, max_steps=3, seed=5), "webshop")
    with pytest.raises(ValueError, match="environment 'webshop' declares none"):
        with_oracle_progress(batch, "data")
    mixed = synthetic_batch(n_groups=1, group_size=2, max_steps=3, seed=5)  # no env_name: unknown environment
    with pytest.raises(ValueError, match="environment None declares none"):
        with_oracle_progress(mixed, "data")
