"""The tiny policy's critic (scpo.policy.critic): the value head, the trunk's state at each prompt's last token
(padding-free), gradients to the trunk, and a head that learns values by the clipped loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scpo.policy.critic import ValueHead, clipped_value_loss, prompt_last_hidden
from scpo.policy.tiny import build_tiny_model

# token-id prompts of a 50-token vocabulary (0 pads): no tokenizer needed
PROMPTS = [[5, 9, 13, 4], [7, 3, 3, 21, 8, 30, 11, 6], [12], [40, 41]]
PAD = 0


class Vocabulary:
    """What build_tiny_model reads of a tokenizer."""

    pad_token_id, bos_token_id, eos_token_id = PAD, 1, 2

    def __len__(self) -> int:
        return 50


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(Vocabulary(), hidden_size=16, layers=1, heads=2).eval()


def test_value_head_shapes_and_an_untrained_head_predicts_zero():
    states = torch.randn(5, 16)
    for hidden in (0, 8):
        head = ValueHead(16, hidden=hidden)
        assert head(states).shape == (5,)
        assert torch.equal(head(states), torch.zeros(5))
        assert head(torch.randn(2, 3, 16)).shape == (2, 3)
    assert len(list(ValueHead(16).parameters())) == 2  # linear: one weight, one bias
    assert ValueHead(1)(torch.ones(3, 1)).shape == (3,)  # the smallest trunk
    assert len(list(ValueHead(16, hidden=8).parameters())) == 4
    with pytest.raises(ValueError, match=r"^ValueHead needs hidden_size >= 1 and hidden >= 0, got 0, 0$"):
        ValueHead(0)
    with pytest.raises(ValueError, match=r"^ValueHead needs hidden_size >= 1 and hidden >= 0, got 16, -1$"):
        ValueHead(16, hidden=-1)


def test_prompt_last_hidden_is_each_prompts_own_last_state_whatever_the_padding(model):
    batched = prompt_last_hidden(model, np.array(PROMPTS[:3], dtype=object))  # a batch column: an object array
    assert batched.shape == (3, 16)
    for k, ids in enumerate(PROMPTS[:3]):
        alone = model.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        torch.testing.assert_close(batched[k], alone, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(batched[0], batched[1])
    message = r"^prompt_last_hidden needs at least one prompt, each with at least one token$"
    with pytest.raises(ValueError, match=message):
        prompt_last_hidden(model, [[1], []])
    with pytest.raises(ValueError, match=message):
        prompt_last_hidden(model, [])
    assert prompt_last_hidden(model, [[7]]).shape == (1, 16)  # a one-token prompt


def test_the_value_loss_reaches_the_trunk_and_the_head():
    model = build_tiny_model(Vocabulary(), hidden_size=16, layers=1, heads=2)
    head = ValueHead(16)
    with torch.no_grad():
        head.out.weight.fill_(0.1)  # a non-zero head, so the trunk gets a gradient
    v = head(prompt_last_hidden(model, PROMPTS[:2]))
    loss, _ = clipped_value_loss(v, torch.tensor([1.0, -1.0]), v.detach(), 0.5)
    loss.backward()
    assert head.out.bias.grad is not None and float(head.out.bias.grad.abs()) > 0
    trunk = model.model.layers[0].mlp.down_proj.weight.grad
    assert trunk is not None and float(trunk.abs().sum()) > 0


def test_a_head_fitted_by_the_clipped_loss_learns_the_values_of_distinct_states(model):
    target = torch.tensor([0.0, 10.0, 2.0, 5.0])
    with torch.no_grad():
        states = prompt_last_hidden(model, PROMPTS)
    head = ValueHead(16, hidden=32)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    first = None
    for _ in range(400):
        old = head(states).detach()
        loss, _ = clipped_value_loss(head(states), target, old, 0.5)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first == pytest.approx(0.5 * float((target**2).mean()))  # V = 0 at the start
    torch.testing.assert_close(head(states).detach(), target, atol=0.1, rtol=0)
