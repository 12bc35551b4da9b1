"""The update with `train.sequence_layout: packed` (the gpu profile's): the same optimizer steps as the padded layout,
with its micro-batches' generated steps in one row each; choice steps and mixed micro-batches keep their values."""

from __future__ import annotations

import pytest
import torch

from scpo.config import load_config
from scpo.policy.tiny import build_tiny_model, train_tokenizer
from scpo.train.update import StepSample, batched_logprobs, ppo_update, step_logprobs


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(["go east go west open door look take apple 1 from table 1 room of cabinet 2"] * 4, 300)


def _samples(tok, n=10, seed=0):
    g = torch.Generator().manual_seed(seed)

    def ids(lo, hi):
        return torch.randint(3, len(tok), (int(torch.randint(lo, hi, (1,), generator=g)),), generator=g).tolist()

    return [StepSample(ids(2, 20), ids(1, 9), float(torch.randn(1, generator=g))) for _ in range(n)]


def _model(tok):
    return build_tiny_model(tok, hidden_size=32, layers=2, heads=2, seed=0).double()


def test_the_gpu_profile_packs_and_the_cpu_profiles_keep_padded_rows():
    assert load_config("params.yaml", profile="gpu").train.sequence_layout == "packed"
    for profile in ("cpu", "smoke"):
        assert load_config("params.yaml", profile=profile).train.sequence_layout == "padded"


def test_a_packed_update_takes_the_padded_updates_steps(tok):
    """Two epochs of minibatches of 4 in micro-batches of 2 (old log-probs recomputed, KL to a reference, entropy
    bonus), from the same weights with the same shuffling: the same statistics and weights after, in float64."""
    reference = _model(tok).requires_grad_(False)
    results = {}
    for layout in ("padded", "packed"):
        model = _model(tok)
        cfg = load_config(
            None,
            overrides={
                "train.lr": 1e-2,
                "train.ppo_epochs": 2,
                "train.minibatch_size": 4,
                "train.micro_batch_size": 2,
                "train.sequence_layout": layout,
            },
        ).train
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        stats = ppo_update(
            model,
            reference,
            opt,
            _samples(tok),
            pad_id=tok.pad_token_id,
            train_cfg=cfg,
            generator=torch.Generator().manual_seed(3),
            progress=False,
        )
        results[layout] = stats, [p.detach().clone() for p in model.parameters()]
    (padded, w_padded), (packed, w_packed) = results["padded"], results["packed"]
    assert padded.keys() == packed.keys() and padded["n_updates"] == 6.0
    for key in padded:
        assert packed[key] == pytest.approx(padded[key], abs=1e-9), key
    moved = max((a - b).abs().max().item() for a, b in zip(w_padded, _model(tok).parameters()))
    assert moved > 1e-3  # the update did move the weights
    for a, b in zip(w_padded, w_packed):
        assert torch.allclose(a, b, atol=1e-10, rtol=0)


def test_packed_log_probs_of_a_mixed_micro_batch_keep_choice_steps_and_sample_order(tok):
    model = _model(tok).eval()
    samples = _samples(tok, n=5, seed=1)
    cands = [samples[0].response_ids, [5, 6], [7]]
    samples[2] = StepSample(samples[2].prompt_ids, cands[1], 0.5, candidates=cands)
    with torch.no_grad():
        padded = step_logprobs(model, samples, tok.pad_token_id, with_entropy=True)
        packed = step_logprobs(model, samples, tok.pad_token_id, with_entropy=True, packed=True)
    for a, b in zip(padded, packed):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-12, rtol=0)
    one_by_one = batched_logprobs(model, samples, tok.pad_token_id, 2, packed=True)
    for row, values in enumerate(one_by_one):
        assert torch.allclose(values, padded[0][row, : int(padded[1][row].sum())], atol=1e-12, rtol=0)
