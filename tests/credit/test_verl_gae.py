"""verl drop-ins for PPO's critic side (scpo.integrations.verl_gae) against verl's public code (tests/helpers/
verl_core_algos.py) on random inputs, and the value loss against a hand computation."""

from __future__ import annotations

import pytest
import torch

from scpo.integrations.verl_gae import (
    LOSS_AGG_MODES,
    aggregate_loss,
    compute_gae_advantage_return,
    compute_value_loss,
    masked_whiten,
)
from scpo.policy.critic import clipped_value_loss

from helpers import verl_core_algos as verl


def random_inputs(seed: int, dtype: torch.dtype, rows: int = 16, width: int = 40):
    """Rewards, values and a multi-turn response mask: each row a run of answer tokens (1), then observation tokens
    (0) and answer tokens again, then padding (0); a reward on some answer tokens."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(rows, width, dtype=dtype)
    for b in range(rows):
        end = int(torch.randint(2, width + 1, (1,), generator=g))
        mask[b, :end] = 1.0
        hole = int(torch.randint(0, end, (1,), generator=g))
        mask[b, hole : hole + int(torch.randint(0, 6, (1,), generator=g))] = 0.0
    rewards = torch.randn(rows, width, generator=g, dtype=dtype) * (torch.rand(rows, width, generator=g) < 0.2)
    values = torch.randn(rows, width, generator=g, dtype=dtype)
    return rewards, values, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("gamma, lam", [(1.0, 1.0), (0.99, 0.95), (0.0, 0.5), (0.7, 0.0)])
def test_gae_drop_in_equals_verls_code_on_random_inputs(dtype, gamma, lam):
    worst = 0.0
    for seed in range(20):
        rewards, values, mask = random_inputs(seed, dtype)
        ours = compute_gae_advantage_return(rewards, values, mask, gamma, lam)
        theirs = verl.compute_gae_advantage_return(rewards, values, mask, gamma, lam)
        for a, b in zip(ours, theirs):
            worst = max(worst, float((a - b).abs().max()))
    assert worst == 0.0  # same arithmetic in the same order: bit-identical


def test_gae_drop_in_checks_shapes_and_whitening_needs_two_positions():
    r, v, m = random_inputs(0, torch.float32)
    with pytest.raises(
        ValueError,
        match=r"^token_level_rewards \(16, 40\), values \(16, 39\) and response_mask \(16, 40\) must have one shape "
        r"\(batch, response_length\)$",
    ):
        compute_gae_advantage_return(r, v[:, :-1], m, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^whitening needs at least 2 positions in the mask, got 1$"):
        masked_whiten(torch.ones(1, 3), torch.tensor([[0.0, 1.0, 0.0]]))


def test_gae_drop_in_by_hand_skips_observation_tokens():
    # one row: answer token (V 1), observation token (masked, V 9), answer token (V 2, reward 3); gamma .5, lam .5
    r = torch.tensor([[0.0, 0.0, 3.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 9.0, 2.0]], dtype=torch.float64)
    m = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)
    _, returns = compute_gae_advantage_return(r, v, m, 0.5, 0.5)
    # t = 2: delta = 3 - 2 = 1, A = 1 ; t = 1 masked: A carried (1) ; t = 0: delta = 0 + .5*2 - 1 = 0, A = 0 + .25 = .25
    torch.testing.assert_close(returns, torch.tensor([[1.25, 10.0, 3.0]], dtype=torch.float64), rtol=0, atol=1e-15)


def test_value_loss_by_hand():
    # c = 0.5; three tokens (the third masked out)
    vpreds = torch.tensor([[2.0, 0.0, 5.0]])
    values = torch.tensor([[1.0, 0.2, 0.0]])
    returns = torch.tensor([[3.0, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    # token 0: clipped to 1.5 -> (2-3)^2 = 1 vs (1.5-3)^2 = 2.25 -> 2.25 (clipped is larger)
    # token 1: 0 within [-0.3, 0.7] -> (0-1)^2 = 1 both -> 1 (not counted as clipped: equal)
    loss, clipfrac = compute_value_loss(vpreds, returns, values, mask, 0.5)
    assert float(loss) == pytest.approx(0.5 * (2.25 + 1.0) / 2)
    assert float(clipfrac) == pytest.approx(0.5, rel=1e-7)
    by_seq = 0.5 * (2.25 + 1.0)  # one sequence: its token sum
    assert float(compute_value_loss(vpreds, returns, values, mask, 0.5, "seq-mean-token-sum")[0]) == pytest.approx(
        by_seq
    )
    norm_loss = compute_value_loss(vpreds, returns, values, mask, 0.5, "seq-mean-token-sum-norm")[0]
    assert float(norm_loss) == pytest.approx(by_seq / 3)
    with pytest.raises(
        ValueError,
        match=r"^loss_agg_mode='sum' is not one of token-mean, seq-mean-token-sum, seq-mean-token-mean, "
        r"seq-mean-token-sum-norm$",
    ):
        aggregate_loss(vpreds, mask, "sum")


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_value_loss_drop_in_equals_verls_code_on_random_inputs(mode):
    worst = 0.0
    for seed in range(20):
        returns, values, mask = random_inputs(seed, torch.float64)
        mask[0] = 0.0  # a sequence with no token
        vpreds = values + torch.randn(
            values.shape, generator=torch.Generator().manual_seed(99 + seed), dtype=values.dtype
        )
        for c in (0.2, 0.5, 10.0):
            ours = compute_value_loss(vpreds, returns, values, mask, c, mode)
            theirs = verl.compute_value_loss(vpreds, returns, values, mask, c, mode)
            worst = max(worst, *(abs(float(a) - float(b)) for a, b in zip(ours, theirs)))
    assert worst <= 1e-14


def test_turn_level_value_loss_is_verls_token_mean_with_one_value_per_turn():
    g = torch.Generator().manual_seed(5)
    lengths = torch.tensor([3, 1, 4, 2, 5])
    vpreds, old, returns = (torch.randn(5, generator=g, dtype=torch.float64) for _ in range(3))
    width = int(lengths.max())
    mask = (torch.arange(width)[None] < lengths[:, None]).double()

    def wide(x):
        return x[:, None].expand(-1, width)

    for c in (0.1, 0.5):
        ours = clipped_value_loss(vpreds, returns, old, c, weights=lengths)
        theirs = verl.compute_value_loss(wide(vpreds), wide(returns), wide(old), mask, c, "token-mean")
        torch.testing.assert_close(ours[0], theirs[0], rtol=1e-12, atol=0)
        torch.testing.assert_close(ours[1], theirs[1].double(), rtol=1e-7, atol=0)
    per_turn = clipped_value_loss(vpreds, returns, old, 0.5)  # each turn once: verl's seq-mean-token-mean
    theirs = verl.compute_value_loss(wide(vpreds), wide(returns), wide(old), mask, 0.5, "seq-mean-token-mean")
    torch.testing.assert_close(per_turn[0], theirs[0], rtol=1e-7, atol=0)
    with pytest.raises(ValueError, match=r"^cliprange_value=0.0 must be > 0$"):
        clipped_value_loss(vpreds, returns, old, 0.0)
    with pytest.raises(ValueError, match=r"^clipped_value_loss needs a positive total weight$"):
        clipped_value_loss(vpreds, returns, old, 0.5, weights=torch.zeros(5))
    one = torch.tensor([1, 0, 0, 0, 0])  # a total weight of 1: the first turn's loss alone
    single = clipped_value_loss(vpreds[:1], returns[:1], old[:1], 0.5)
    torch.testing.assert_close(clipped_value_loss(vpreds, returns, old, 0.5, weights=one)[0], single[0])
