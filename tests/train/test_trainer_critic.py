"""PPO's critic in the trainer (scpo.train.critic): its value loss falls on a fixed batch, micro-batches accumulate the
minibatch's token-mean, its state makes a round trip through a folder, and a PPO run resumed from a checkpoint gives
the same bytes and metrics as the uninterrupted run; every other method trains no critic."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from scpo.config import CriticConfig, load_config
from scpo.policy.tiny import build_tiny_model
from scpo.run.checkpoint import CheckpointError
from scpo.train.critic import CRITIC_DIR, CRITIC_OPTIMIZER, CRITIC_WEIGHTS, Critic

from helpers.runs import CORRIDOR, comparable_history

# 12 token-id prompts (0 pads); their returns depend on the prompt's first token, as a state's value on the state
PROMPTS = [[5 + k % 4, 9, 13 + k, 4][: 2 + k % 3] for k in range(12)]
RETURNS = np.array([10.0 if p[0] in (5, 7) else -1.0 for p in PROMPTS])
WEIGHTS = np.array([1.0 + k % 3 for k in range(12)])


class Vocabulary:
    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2

    def __len__(self) -> int:
        return 50


def _critic(**options) -> Critic:
    torch.manual_seed(0)
    model = build_tiny_model(Vocabulary(), hidden_size=16, layers=1, heads=2)
    return Critic(model, CriticConfig(**{"minibatch_size": 4, **options}), seed=0)


def test_the_value_loss_falls_on_a_fixed_batch():
    critic = _critic(lr=1e-2)
    losses, ev = [], []
    for it in range(12):
        old = critic.values(PROMPTS)
        m = critic.fit(PROMPTS, RETURNS, old, WEIGHTS, torch.Generator().manual_seed(it))
        losses.append(m["critic/value_loss_before"])
        ev.append(m["critic/explained_variance"])
        # the loss before the update is the token-weighted half squared error of the values it was given
        assert m["critic/value_loss_before"] == pytest.approx(0.5 * WEIGHTS @ (old - RETURNS) ** 2 / WEIGHTS.sum())
    assert losses[0] == pytest.approx(0.5 * WEIGHTS @ RETURNS**2 / WEIGHTS.sum())  # an untrained critic: V = 0
    assert losses[-1] < 0.25 * losses[0] and ev[-1] > 0.5 > ev[0]
    assert all(b < a for a, b in zip(losses[:4], losses[1:5]))


def test_micro_batches_accumulate_the_minibatchs_token_mean():
    """One step on a minibatch of 4 equals four micro-batches of 1 with their gradients accumulated."""
    whole, micro = _critic(epochs=1), _critic(epochs=1, micro_batch_size=1)
    old = whole.values(PROMPTS)
    a = whole.fit(PROMPTS, RETURNS, old, WEIGHTS, torch.Generator().manual_seed(3))
    b = micro.fit(PROMPTS, RETURNS, old, WEIGHTS, torch.Generator().manual_seed(3))
    assert a["critic/value_loss"] == pytest.approx(b["critic/value_loss"], rel=1e-5)
    np.testing.assert_allclose(whole.values(PROMPTS), micro.values(PROMPTS), rtol=1e-4, atol=1e-5)


def test_rows_without_an_answer_are_left_out_and_two_are_needed():
    critic = _critic()
    weights = WEIGHTS.copy()
    weights[:6] = 0
    m = critic.fit(PROMPTS, RETURNS, np.zeros(12), weights, torch.Generator().manual_seed(0))
    assert m["critic/value_loss_before"] == pytest.approx(0.5 * weights @ RETURNS**2 / weights.sum())
    with pytest.raises(ValueError, match=r"^the critic needs at least 2 steps with an answer to train on, got 1$"):
        critic.fit(PROMPTS, RETURNS, np.zeros(12), np.eye(12)[0], torch.Generator())


def test_the_critics_state_makes_a_round_trip_and_a_missing_one_is_named(tmp_path):
    critic = _critic()
    critic.fit(PROMPTS, RETURNS, critic.values(PROMPTS), WEIGHTS, torch.Generator().manual_seed(0))
    critic.save(tmp_path / "ckpt" / CRITIC_DIR)
    other = _critic(lr=0.5)  # another learning rate: the optimizer's state carries the saved one
    assert not np.array_equal(other.values(PROMPTS), critic.values(PROMPTS))
    other.load(tmp_path / "ckpt" / CRITIC_DIR)
    np.testing.assert_array_equal(other.values(PROMPTS), critic.values(PROMPTS))
    gen_a, gen_b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    old = critic.values(PROMPTS)
    assert critic.fit(PROMPTS, RETURNS, old, WEIGHTS, gen_a) == other.fit(PROMPTS, RETURNS, old, WEIGHTS, gen_b)
    (tmp_path / "ckpt" / CRITIC_DIR / CRITIC_OPTIMIZER).unlink()
    with pytest.raises(CheckpointError, match=r"holds no critic \(.*optimizer.safetensors missing\): it was written"):
        other.load(tmp_path / "ckpt" / CRITIC_DIR)
    critic.save(tmp_path / "again")
    with pytest.raises(CheckpointError, match=r"^the critic in .* does not fit this run's \(train.critic\): "):
        _critic(head_hidden=8).load(tmp_path / "again")


def _run(out, iterations: int, method: str = "ppo", resume: bool = False) -> dict:
    from scpo.train.run import run_training

    overrides = {**CORRIDOR, "credit.method": method, "train.iterations": iterations, "env.corridor.max_steps": 5}
    cfg = load_config("params.yaml", profile="smoke", overrides=overrides)
    return run_training(cfg, stage="rl", out_dir=out, resume=resume)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("ppo") / "run"
    _run(out, 3)
    return out


def test_a_ppo_run_logs_its_critic_and_keeps_it_in_every_checkpoint(uninterrupted):
    hist = pd.read_csv(uninterrupted / "history.csv")
    for col in ("critic/value_loss", "critic/value_loss_before", "critic/explained_variance", "critic/vf_clipfrac"):
        assert col in hist and np.isfinite(hist[col]).all(), col
    assert (hist["perf/critic_update_s"] > 0).all() and (hist["perf/critic_values_s"] > 0).all()
    for ckpt in ("iter_0001", "iter_0002", "iter_0003"):
        assert (uninterrupted / "checkpoints" / ckpt / CRITIC_DIR / CRITIC_WEIGHTS).is_file()
    assert (uninterrupted / CRITIC_DIR / CRITIC_WEIGHTS).is_file()
    from scpo.batch import RolloutBatch

    batch = RolloutBatch.read(uninterrupted / "rollouts" / "iter_0000.parquet")
    assert batch.critic_value is not None and np.all(batch.critic_value == 0)  # the untrained head predicts 0
    later = RolloutBatch.read(uninterrupted / "rollouts" / "iter_0002.parquet")
    assert np.any(later.critic_value != 0)


def test_a_ppo_run_folder_can_be_overwritten(uninterrupted):
    """Its critic/ is one of a run's own entries: --overwrite may replace the folder (the plan writes nothing)."""
    from scpo.run.plan import make_plan

    overrides = {**CORRIDOR, "credit.method": "ppo", "env.corridor.max_steps": 5}
    cfg = load_config("params.yaml", profile="smoke", overrides=overrides)
    assert make_plan(cfg, "rl", uninterrupted, overwrite=True).mode == "overwrite"


def test_a_resumed_ppo_run_equals_the_uninterrupted_one_byte_for_byte(uninterrupted, tmp_path):
    stopped = tmp_path / "run"
    _run(stopped, 1)
    _run(stopped, 3, resume=True)
    pd.testing.assert_frame_equal(comparable_history(uninterrupted), comparable_history(stopped))
    for rel in (f"{CRITIC_DIR}/{CRITIC_WEIGHTS}", "model/model.safetensors"):
        assert (stopped / rel).read_bytes() == (uninterrupted / rel).read_bytes(), rel
    last = f"checkpoints/iter_0003/{CRITIC_DIR}/{CRITIC_OPTIMIZER}"
    assert (stopped / last).read_bytes() == (uninterrupted / last).read_bytes()


def test_other_methods_train_no_critic(tmp_path):
    from scpo.run.plan import make_plan

    cfg = load_config("params.yaml", profile="smoke", overrides=CORRIDOR)
    assert make_plan(cfg, "rl", tmp_path / "a").critic is None
    ppo = load_config("params.yaml", profile="smoke", overrides={**CORRIDOR, "credit.method": "ppo"})
    plan = make_plan(ppo, "rl", tmp_path / "b")
    assert plan.critic is not None and plan.critic.start == plan.start and plan.critic.options == ppo.train.critic
    assert any(n.startswith("critic (credit.method ppo): ") for n in plan.notes)
    assert make_plan(ppo, "sft", tmp_path / "c").critic is None


@pytest.mark.parametrize(("dtype", "checkpointing", "device"), [("bfloat16", True, "cpu"), ("float32", False, "meta")])
def test_from_start_puts_the_start_model_on_the_runs_device_with_its_precision_and_checkpointing(
    monkeypatch, dtype, checkpointing, device
):
    """The critic's trunk: the start model loaded in float32, its forward passes in policy.dtype (a bfloat16 run's
        autocast wrapper on the decoder), gradient checkpointing as train.gradient_checkpointing says; trunk and head on
        the run's device (torch's `meta` device for a float32 run: no CPU default can stand in for it; autocast has no
    `meta` device)."""
    from scpo.policy.placement import forward_precision
    from scpo.train import critic as critic_module

    loads = []

    def load(path, dtype="float32", device=None):
        loads.append((path, dtype))
        return SimpleNamespace(model=build_tiny_model(Vocabulary(), hidden_size=16, layers=1, heads=2).to(device))

    monkeypatch.setattr(critic_module, "load_policy", load)
    overrides = {"policy.dtype": dtype, "train.gradient_checkpointing": checkpointing}
    cfg = load_config("params.yaml", profile="smoke", overrides=overrides)
    critic = Critic.from_start(cfg, "start/model", torch.device(device), seed=0)
    assert loads == [("start/model", "float32")]
    assert {p.device.type for p in critic.module.parameters()} == {device}
    assert next(critic.module["trunk"].parameters()).dtype == torch.float32
    trunk = critic.module["trunk"]
    autocast = not isinstance(forward_precision(trunk.model), contextlib.nullcontext)
    assert autocast is (dtype != "float32")
    flag = (
        "is_activation_checkpointing"
        if hasattr(type(trunk), "is_activation_checkpointing")
        else "is_gradient_checkpointing"
    )
    assert getattr(trunk, flag) is checkpointing
    assert critic.options == cfg.train.critic


def test_a_critic_file_missing_a_tensor_or_both_files_are_named(tmp_path):
    """strict loading: a weights file without one of the module's tensors is refused with the loader's first line;
    a folder with neither file names both."""
    from safetensors.torch import load_file, save_file

    critic = _critic()
    critic.save(tmp_path / "c")
    tensors = load_file(tmp_path / "c" / CRITIC_WEIGHTS)
    tensors.pop("head.out.bias")
    save_file(tensors, tmp_path / "c" / CRITIC_WEIGHTS)
    with pytest.raises(
        CheckpointError,
        match=r"^the critic in .*c does not fit this run's \(train.critic\): "
        r"Error\(s\) in loading state_dict for ModuleDict:$",
    ):
        _critic().load(tmp_path / "c")
    with pytest.raises(CheckpointError) as err:
        _critic().load(tmp_path / "empty" / CRITIC_DIR)
    both = f"{tmp_path / 'empty' / CRITIC_DIR / CRITIC_WEIGHTS}, {tmp_path / 'empty' / CRITIC_DIR / CRITIC_OPTIMIZER}"
    assert f"holds no critic ({both} missing)" in str(err.value)


def test_a_load_error_without_a_message_is_named_by_its_type(tmp_path, monkeypatch):
    from scpo.train import critic as critic_module

    critic = _critic()
    critic.save(tmp_path / "c")

    def fails(*args, **kwargs):
        raise ValueError()

    monkeypatch.setattr(critic_module, "load_model", fails)
    with pytest.raises(CheckpointError, match=r"does not fit this run's \(train.critic\): ValueError$"):
        critic.load(tmp_path / "c")


def test_one_minibatch_step_is_the_share_weighted_float32_loss_of_its_micro_batches():
    """epochs 1, one minibatch of all 12 rows, micro-batches of 4: value_loss and vf_clipfrac are the sums of each
    micro-batch's clipped loss and clip share (float32, as the head's values) times its share of the minibatch's
    weight; V_old off the current values by +-1 (clipped) or 0.2 (within the clip range); value_mean is V_old's mean."""
    from scpo.policy.critic import clipped_value_loss

    critic = _critic(epochs=1, minibatch_size=12, micro_batch_size=4)
    k = np.arange(12)
    old = critic.values(PROMPTS) + np.where(k % 3 == 0, 0.2, np.where(k % 2, 1.0, -1.0))
    idx = torch.randperm(12, generator=torch.Generator().manual_seed(5))
    target, old32, w = (torch.tensor(x, dtype=torch.float32) for x in (RETURNS, old, WEIGHTS))
    loss_sum = clip_sum = 0.0
    with torch.no_grad():
        for micro in idx.split(4):
            share = float(w[micro].sum() / w.sum())
            rows = micro.tolist()
            loss, clipfrac = clipped_value_loss(
                critic._values([PROMPTS[i] for i in rows]), target[micro], old32[micro], 0.5, w[micro]
            )
            loss_sum += float(loss) * share
            clip_sum += float(clipfrac) * share
    m = critic.fit(PROMPTS, RETURNS, old, WEIGHTS, torch.Generator().manual_seed(5))
    assert 0 < clip_sum < 1
    assert m["critic/value_loss"] == loss_sum and m["critic/vf_clipfrac"] == clip_sum
    assert m["critic/value_mean"] == pytest.approx(old.mean())


def test_two_rows_with_an_answer_are_enough_and_no_prompt_gives_no_value():
    critic = _critic()
    m = critic.fit(PROMPTS, RETURNS, np.zeros(12), np.eye(12)[0] + np.eye(12)[1], torch.Generator().manual_seed(0))
    assert m["critic/value_loss_before"] == pytest.approx(0.5 * (RETURNS[0] ** 2 + RETURNS[1] ** 2) / 2)
    values = critic.values([])
    assert values.shape == (0,) and values.dtype == np.float64


def test_max_grad_norm_clips_the_critics_gradient():
    """A gradient clipped to norm 1e-12 is below AdamW's eps: the step barely moves V; unclipped it moves."""
    for max_grad_norm, moves in ((1e-12, False), (None, True)):
        critic = _critic(lr=1e-2, max_grad_norm=max_grad_norm)
        before = critic.values(PROMPTS)
        critic.fit(PROMPTS, RETURNS, before, WEIGHTS, torch.Generator().manual_seed(0))
        assert bool(np.abs(critic.values(PROMPTS) - before).max() > 1e-3) is moves


def test_the_critic_saves_twice_into_one_folder_with_its_optimizer_named(tmp_path):
    from safetensors import safe_open

    critic = _critic()
    critic.fit(PROMPTS, RETURNS, critic.values(PROMPTS), WEIGHTS, torch.Generator().manual_seed(0))
    critic.save(tmp_path / "c")
    critic.save(tmp_path / "c")  # a checkpoint folder written again (a repeated save) is overwritten
    with safe_open(tmp_path / "c" / CRITIC_OPTIMIZER, "pt") as fh:
        names = list(fh.keys())
    assert names and all(n.startswith("critic_optimizer") for n in names)


def test_the_critics_adamw_takes_train_critic_lr_and_weight_decay():
    """Not AdamW's defaults (1e-3, 0.01): train.critic's, here 3e-4 and 0."""
    critic = _critic(lr=3e-4, weight_decay=0.0)
    group = critic.optimizer.param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (3e-4, 0.0)
    assert len(group["params"]) == len(list(critic.module.parameters()))
