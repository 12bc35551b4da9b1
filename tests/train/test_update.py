"""One clipped-ratio update moves the policy the way the advantage says."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scpo.config import load_config
from scpo.policy.tiny import build_tiny_model, train_tokenizer
from scpo.train.update import StepSample, batched_logprobs, ppo_update


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_update_raises_logprob_of_positive_and_lowers_negative_advantage(sign):
    tok = train_tokenizer(["go east go west open door look"] * 4, vocab_size=280)
    model = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
    reference = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0).requires_grad_(False)
    prompt = tok("room 1 of 3", add_special_tokens=False)["input_ids"]
    answer = tok("<action>go east</action>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    samples = [StepSample(prompt, answer, sign)]
    train_cfg = load_config(None, overrides={"train.lr": 1e-2, "train.ppo_epochs": 2}).train
    before = batched_logprobs(model, samples, tok.pad_token_id, 8)[0].sum().item()
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr)
    stats = ppo_update(model, reference, opt, samples, pad_id=tok.pad_token_id, train_cfg=train_cfg)
    after = batched_logprobs(model, samples, tok.pad_token_id, 8)[0].sum().item()
    assert (after - before) * sign > 0
    assert stats["n_updates"] == 2.0 and stats["kl"] >= 0.0 and 0.0 <= stats["clipfrac"] <= 1.0


def _choice_setup():
    tok = train_tokenizer(["go east go west open door look"] * 4, vocab_size=280)
    model = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
    reference = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0).requires_grad_(False)
    prompt = tok("room 1 of 3", add_special_tokens=False)["input_ids"]
    cands = [
        tok(f"<action>{c}</action>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        for c in ("go east", "go west", "look")
    ]
    return tok, model, reference, prompt, cands


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_choice_steps_train_the_probability_of_the_sampled_choice(sign):
    from scpo.policy.scoring import candidate_scores

    tok, model, reference, prompt, cands = _choice_setup()
    samples = [StepSample(prompt, cands[1], sign, candidates=cands)]
    old = batched_logprobs(model, samples, tok.pad_token_id, 8)[0]
    with torch.no_grad():
        scores = candidate_scores(model, [prompt], [cands], tok.pad_token_id)[0]
    assert old.shape == (1,) and torch.allclose(old, torch.log_softmax(scores, -1)[1:2], atol=1e-5)  # log pi(k | x)
    train_cfg = load_config(None, overrides={"train.lr": 1e-2, "train.ppo_epochs": 2}).train
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr)
    stats = ppo_update(model, reference, opt, samples, pad_id=tok.pad_token_id, train_cfg=train_cfg)
    new = batched_logprobs(model, samples, tok.pad_token_id, 8)[0]
    assert (new - old).item() * sign > 0
    assert stats["n_updates"] == 2.0 and stats["entropy"] <= torch.log(torch.tensor(3.0)).item() + 1e-6


def test_ratio_over_tokens_ignores_the_candidates():
    tok, model, reference, prompt, cands = _choice_setup()
    samples = [StepSample(prompt, cands[0], 1.0, candidates=cands)]
    cfg = {"train.lr": 1e-2, "train.entropy_coef": 0.0, "train.kl_coef": 0.0}
    runs = {}
    for mode in ("tokens", "admissible"):
        m = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
        train_cfg = load_config(None, overrides={**cfg, "train.ratio_over": mode}).train
        opt = torch.optim.AdamW(m.parameters(), lr=train_cfg.lr)
        ppo_update(m, None, opt, samples, pad_id=tok.pad_token_id, train_cfg=train_cfg)
        runs[mode] = torch.cat([p.detach().flatten() for p in m.parameters()])
    # the token path is exactly the update of the same answer given without candidates
    m = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
    train_cfg = load_config(None, overrides=cfg).train
    ppo_update(
        m,
        None,
        torch.optim.AdamW(m.parameters(), lr=1e-2),
        [StepSample(prompt, cands[0], 1.0)],
        pad_id=tok.pad_token_id,
        train_cfg=train_cfg,
    )
    plain = torch.cat([p.detach().flatten() for p in m.parameters()])
    assert torch.equal(runs["tokens"], plain) and not torch.equal(runs["admissible"], plain)


def test_a_minibatch_may_mix_choice_and_generated_steps():
    from scpo.train.update import step_logprobs

    tok, model, _, prompt, cands = _choice_setup()
    samples = [StepSample(prompt, cands[2], 1.0, candidates=cands), StepSample(prompt, cands[0], -1.0)]
    logp, mask, entropy = step_logprobs(model, samples, tok.pad_token_id, with_entropy=True)
    assert mask[0].tolist() == [1.0] + [0.0] * (len(cands[0]) - 1) and mask[1].sum() == len(cands[0])
    assert logp[0, 0] < 0 and entropy[0, 0] > 0
    with pytest.raises(ValueError, match="not one of|Input should be"):
        load_config(None, overrides={"train.ratio_over": "words"})


def test_micro_batches_accumulate_the_minibatch_gradient():
    """micro_batch_size splits a minibatch's forward / backward passes; the optimizer step is the same as in one pass,
    with choice steps (one unit) and generated answers (a unit per token) weighted as in the whole minibatch."""
    tok, _, _, prompt, cands = _choice_setup()
    long_prompt = tok("room 1 of 3 go west open door", add_special_tokens=False)["input_ids"]
    samples = [
        StepSample(prompt, cands[2], 1.0, candidates=cands),
        StepSample(prompt, cands[0], -0.5),
        StepSample(long_prompt, cands[1], 2.0),
        StepSample(long_prompt, cands[0], -1.0, candidates=cands),
        StepSample(prompt, cands[1] + cands[2], 0.7),
    ]
    params, stats = [], []
    for micro in (None, 2, 1):
        model = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
        reference = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=3).requires_grad_(False)
        train_cfg = load_config(
            None, overrides={"train.lr": 1e-2, "train.minibatch_size": 5, "train.micro_batch_size": micro}
        ).train
        opt = torch.optim.SGD(model.parameters(), lr=train_cfg.lr)
        stats.append(
            ppo_update(
                model,
                reference,
                opt,
                samples,
                pad_id=tok.pad_token_id,
                train_cfg=train_cfg,
                generator=torch.Generator().manual_seed(0),
            )
        )
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    base = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
    moved = (params[0] - torch.cat([p.detach().flatten() for p in base.parameters()])).abs().max()
    assert moved > 1e-4  # the step did something
    for p, s in zip(params[1:], stats[1:]):
        assert torch.allclose(p, params[0], atol=1e-6)
        assert s["n_updates"] == stats[0]["n_updates"] == 1.0
        assert s["kl"] == pytest.approx(stats[0]["kl"], abs=1e-6) and s["pg"] == pytest.approx(stats[0]["pg"], abs=1e-6)


def _tiny_pair():
    tok = train_tokenizer(["go east go west open door look"] * 4, vocab_size=280)
    model = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0)
    reference = build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=0).requires_grad_(False)
    return tok, model, reference


def test_zero_advantage_steps_count_in_the_token_mean_when_kept():
    """verl-agent keeps steps whose advantage is 0 (train.skip_zero_advantage: false in the gpu profile): they add no
    policy gradient but their tokens count in the token-mean. A = 1 on a 3-token answer and A = 0 on a 2-token one:
    at ratio 1 the policy-gradient loss is -(1 * 3 + 0 * 2) / 5 = -0.6, against -1 when the zero step is left out."""
    from scpo.batch import RolloutBatch
    from scpo.train.update import update_samples

    tok, model, reference = _tiny_pair()
    prompt = tok("room 1 of 3", add_special_tokens=False)["input_ids"]
    a3 = tok("go east", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    a2 = tok("go", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert (len(a3), len(a2)) == (3, 2)
    batch = RolloutBatch.from_columns(
        group_id=[0, 0],
        traj_id=[0, 0],
        step=[0, 1],
        reward=[0.0, 0.0],
        prompt=["room 1 of 3"] * 2,
        prompt_ids=[prompt, prompt],
        response_ids=[a3, a2],
        candidate_ids=[None, None],
    )
    for skip, pg, n in ((False, -0.6, 2), (True, -1.0, 1)):
        samples, n_steps = update_samples(batch, np.array([1.0, 0.0]), skip)
        assert (len(samples), n_steps) == (n, 2)
        train_cfg = load_config(
            None, overrides={"train.lr": 1e-12, "train.kl_coef": 0.0, "train.entropy_coef": 0.0}
        ).train
        opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr)
        stats = ppo_update(model, reference, opt, samples, pad_id=tok.pad_token_id, train_cfg=train_cfg)
        assert stats["pg"] == pytest.approx(pg, abs=1e-5)


def test_weight_decay_is_decoupled_and_taken_from_the_config():
    """AdamW with train.weight_decay (verl: 0.01): a parameter without gradient shrinks by exactly (1 - lr * wd)."""
    from scpo.train.update import make_optimizer

    for wd in (0.0, 0.01):
        layer = torch.nn.Linear(4, 4)
        before = layer.weight.detach().clone()
        opt = make_optimizer(layer, load_config(None, overrides={"train.lr": 0.1, "train.weight_decay": wd}).train)
        layer.weight.grad = torch.zeros_like(layer.weight)
        layer.bias.grad = torch.zeros_like(layer.bias)
        opt.step()
        assert torch.allclose(layer.weight, before * (1 - 0.1 * wd), atol=1e-7, rtol=0)
        assert opt.param_groups[0]["weight_decay"] == wd


def test_minibatch_orders():
    """collected: consecutive steps in collection order (verl's split on one GPU); length_buckets: every index once,
    each minibatch of similar lengths."""
    from scpo.train.update import minibatches

    assert minibatches([5, 1, 4, 2, 3], 2, "collected") == [[0, 1], [2, 3], [4]]
    buckets = minibatches([5, 1, 4, 2, 3, 6], 2, "length_buckets", torch.Generator().manual_seed(0))
    assert sorted(i for b in buckets for i in b) == list(range(6))
    assert sorted(sorted([5, 1, 4, 2, 3, 6][i] for i in b) for b in buckets) == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError, match="'sorted'"):
        minibatches([1], 1, "sorted")


def _plain_scores(model, prompt, cands) -> torch.Tensor:
    """[1, K]: log p(y_k | x) of each candidate from one plain forward pass over prompt + candidate (gradients flow)."""
    sums = []
    for y in cands:
        logits = model(input_ids=torch.tensor([list(prompt) + list(y)])).logits[0, len(prompt) - 1 : -1].float()
        sums.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(y)[:, None]).sum())
    return torch.stack(sums)[None]


def test_update_loss_and_gradients_equal_the_unbatched_computation():
    """One minibatch of choice steps (two sharing a prompt) and generated steps: the update's loss statistics and its
    gradient equal the objective computed sample by sample from plain forward passes (module docstring of
    scpo.train.loss), with old log-probs from the sampler and from a recomputation."""
    from scpo.policy.scoring import candidate_scores, choice_log_distribution
    from scpo.train.loss import policy_loss
    from scpo.train.update import old_logprobs

    tok, model, reference, prompt, cands = _choice_setup()
    with torch.no_grad():
        reference.load_state_dict({k: v + 0.01 * torch.randn_like(v) for k, v in model.state_dict().items()})
    other = tok("go west open door", add_special_tokens=False)["input_ids"]
    gen = tok("<action>look</action>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        sampled = torch.log_softmax(candidate_scores(model, [prompt], [cands], tok.pad_token_id)[0], -1)
    samples = [
        StepSample(prompt, cands[0], 1.5, candidates=cands, old_logprob=float(sampled[0])),
        StepSample(prompt, cands[2], -0.5, candidates=cands, old_logprob=float(sampled[2])),  # the same prompt
        StepSample(other, cands[1], 0.7, candidates=cands[:2]),  # no sampler value: recomputed
        StepSample(prompt, gen, -1.0),  # a generated answer: token log-probs
    ]
    overrides = {"train.max_grad_norm": 1e9, "train.minibatch_size": 8, "train.entropy_coef": 0.01, "train.lr": 1e-9}
    train_cfg = load_config(None, overrides=overrides).train
    old = old_logprobs(model, samples, tok.pad_token_id, 8, 1.0, "sampler")
    recomputed = old_logprobs(model, samples, tok.pad_token_id, 8, 1.0, "recompute")
    for a, b in zip(old, recomputed):
        assert torch.allclose(a, b, atol=1e-6)  # the sampler's values are the same computation
    assert old[0].item() == float(sampled[0]) and old[1].item() == float(sampled[2])

    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    stats = ppo_update(model, reference, opt, samples, pad_id=tok.pad_token_id, train_cfg=train_cfg, progress=False)
    fast = [p.grad.clone() for p in model.parameters()]

    # the same objective, one sample at a time
    model.zero_grad(set_to_none=True)
    units, terms = 0, []
    for s, o in zip(samples, old):
        if s.candidates is not None:  # every candidate's log-likelihood from its own forward pass, no cache or mask
            log_pi = choice_log_distribution(_plain_scores(model, s.prompt_ids, s.candidates))
            with torch.no_grad():
                ref_pi = choice_log_distribution(_plain_scores(reference, s.prompt_ids, s.candidates))
            k = s.candidates.index(s.response_ids)
            logp, ref, ent = log_pi[:, k : k + 1], ref_pi[:, k : k + 1], -(log_pi.exp() * log_pi).sum(-1, keepdim=True)
        else:
            ids = torch.tensor([s.prompt_ids + s.response_ids])
            lp = torch.log_softmax(model(input_ids=ids).logits[0, len(s.prompt_ids) - 1 : -1].float(), -1)
            logp = lp.gather(-1, torch.tensor(s.response_ids)[:, None]).T
            ent = -(lp.exp() * lp).sum(-1)[None]
            with torch.no_grad():
                rlp = torch.log_softmax(reference(input_ids=ids).logits[0, len(s.prompt_ids) - 1 : -1].float(), -1)
            ref = rlp.gather(-1, torch.tensor(s.response_ids)[:, None]).T
        mask = torch.ones_like(logp)
        loss, st = policy_loss(
            logp,
            o[None].to(logp.dtype),
            ref,
            torch.tensor([s.advantage]),
            mask,
            ent,
            clip_ratio=train_cfg.clip_ratio,
            kl_coef=train_cfg.kl_coef,
            entropy_coef=train_cfg.entropy_coef,
        )
        n = mask.numel()
        (loss * n).backward()
        units += n
        terms.append((st, n))
    for key in ("pg", "kl", "entropy"):
        want = sum(st[key] * n for st, n in terms) / units
        assert stats[key] == pytest.approx(want, abs=1e-6), key
    for g_fast, p in zip(fast, model.parameters()):
        assert torch.allclose(g_fast, p.grad / units, atol=1e-6, rtol=1e-4)
