"""left_pad / right_pad against hand-written tensors."""

import pytest
import torch

from scpo.policy.padding import left_pad, right_pad


def test_left_pad_puts_every_prompt_flush_right():
    ids, mask = left_pad([[5, 6, 7], [8], []], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert ids.dtype == mask.dtype == torch.long


def test_right_pad_to_a_given_width():
    ids, mask = right_pad([[5, 6], [], [7]], pad_id=9, width=4)
    assert ids.tolist() == [[5, 6, 9, 9], [9, 9, 9, 9], [7, 9, 9, 9]]
    assert mask.tolist() == [[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]


def test_a_width_shorter_than_a_sequence_is_an_error_naming_both():
    with pytest.raises(ValueError, match=r"width 2 .* \(3 tokens\)"):
        left_pad([[1, 2, 3]], pad_id=0, width=2)
