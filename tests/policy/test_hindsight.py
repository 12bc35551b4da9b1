"""HCAPO's hindsight re-scoring: mean answer-token log-prob at temperature 5 under the prompt + final observation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scpo.batch import RolloutBatch, Step, Trajectory
from scpo.policy.hindsight import hindsight_logprob, hindsight_prompt
from scpo.policy.profiles import Policy
from scpo.policy.tiny import build_tiny_model, train_tokenizer


@pytest.fixture(scope="module")
def policy():
    texts = ["You are in room 1 of 3. go east open door take key <action>go east</action>"] * 4
    tok = train_tokenizer(texts, vocab_size=300)
    return Policy(
        model=build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=1).eval(), tokenizer=tok, profile="tiny"
    )


def _traj(policy, answers, final="The door opens. You win."):
    steps = []
    for k, ans in enumerate(answers):
        ids = policy.tokenizer(ans, add_special_tokens=False)["input_ids"]
        steps.append(
            Step(
                observation=f"room {k}",
                action="go east",
                reward=0.0,
                next_observation=f"room {k + 1}",
                prompt=f"Step {k}. You are in room {k} of 3.",
                response=ans,
                prompt_ids=[],
                response_ids=ids,
            )
        )
    steps[-1].next_observation = final
    return Trajectory(task_id="t", seed=0, index=0, steps=steps)


def _batch(*trajectories) -> RolloutBatch:
    return RolloutBatch.from_trajectories(
        [Trajectory(task_id=t.task_id, seed=t.seed, index=i, steps=t.steps) for i, t in enumerate(trajectories)]
    )


def test_hindsight_logprob_equals_manual_tempered_mean(policy):
    traj = _traj(policy, ["<action>go east</action>", "<action>open door</action>"])
    got = hindsight_logprob(policy, _batch(traj), temperature=5.0, max_prompt_tokens=200)
    for k, step in enumerate(traj.steps):
        text = policy.format_prompt(hindsight_prompt(step.prompt, "The door opens. You win."))
        prompt_ids = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
        resp = step.response_ids
        with torch.no_grad():
            logits = policy.model(torch.tensor([prompt_ids + resp])).logits[0] / 5.0
        logp = torch.log_softmax(logits, -1)
        expect = np.mean([logp[len(prompt_ids) - 1 + j, t].item() for j, t in enumerate(resp)])
        assert got[k] == pytest.approx(expect, abs=1e-5)


def test_hindsight_scores_of_a_deeper_model_in_small_batches_equal_plain_passes(policy):
    """Two layers (the prompt pass computes the last one at the predicting positions only), answers of different
    lengths, two rows per scoring batch: each score is the plain forward pass's tempered mean."""
    deep = Policy(
        model=build_tiny_model(policy.tokenizer, hidden_size=32, layers=2, heads=2, seed=3).eval(),
        tokenizer=policy.tokenizer,
        profile="tiny",
    )
    traj = _traj(deep, ["<action>go east</action>", "<action>open door take key</action>", "<action>look</action>"])
    got = hindsight_logprob(deep, _batch(traj), temperature=5.0, max_prompt_tokens=200, batch_size=2)
    for k, step in enumerate(traj.steps):
        text = deep.format_prompt(hindsight_prompt(step.prompt, "The door opens. You win."))
        prompt_ids = deep.tokenizer(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = deep.model(torch.tensor([prompt_ids + step.response_ids])).logits[0] / 5.0
        logp = torch.log_softmax(logits, -1)
        expect = np.mean([logp[len(prompt_ids) - 1 + j, t].item() for j, t in enumerate(step.response_ids)])
        assert got[k] == pytest.approx(expect, abs=1e-5)


def test_hindsight_depends_on_final_observation_and_temperature(policy):
    answers = ["<action>go east</action>"]
    won = hindsight_logprob(policy, _batch(_traj(policy, answers)), temperature=5.0)
    lost = hindsight_logprob(policy, _batch(_traj(policy, answers, final="Nothing happens.")), temperature=5.0)
    cold = hindsight_logprob(policy, _batch(_traj(policy, answers)), temperature=1.0)
    assert won[0] != lost[0]
    # a higher temperature flattens the distribution: mean log-prob moves towards -log(V)
    assert abs(won[0] + np.log(len(policy.tokenizer))) < abs(cold[0] + np.log(len(policy.tokenizer)))


def test_empty_answer_scores_zero_and_rows_align(policy):
    traj = _traj(policy, ["<action>go east</action>", "x"])
    traj.steps[1].response_ids = []
    out = hindsight_logprob(policy, _batch(traj, _traj(policy, ["<action>look</action>"])))
    assert out.shape == (3,) and out[1] == 0.0 and out[0] < 0 and out[2] < 0
