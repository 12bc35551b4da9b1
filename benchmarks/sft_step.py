"""One SFT step's forward and backward pass (answer-token log-probs, `scpo.policy.logprobs.response_logprobs`) with the
last decoder layer at the answer positions only, against the model's own forward pass over the same batches, side by
side in one process.

    env $(python -m scpo.numerics env) python benchmarks/sft_step.py [--env alfworld] [--demos 100] [--rounds 5]
    python benchmarks/sft_step.py --quick    # 4 demonstrations of the games in tests/fixtures, one round (seconds)

The batches are SFT's: `--demos` expert demonstrations of the cpu profile (`scpo.envs.demos`; needs the prepared
data), encoded as `behaviour_cloning` encodes them, in its length-bucketed minibatches of `train.sft.batch_size`. The
policy is the pipeline's warm start `runs/<env>/sft/seed0` when it exists, else a fresh tiny policy. One thread. Each
round runs every batch through both passes in turn (the order alternating between rounds), with gradients and no
optimizer step; printed: the median ms per batch of each over the rounds and their ratio (shortcut / own forward),
and the largest difference of the log-probs.

On the idle 2-core AMD EPYC (Zen 4), numerics pin, ALFWorld, 100 demos (about 600 steps, batches of 8): see
benchmarks/results/README.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from scpo.config import load_config
from scpo.envs.demos import demo_tasks, expert_demonstrations
from scpo.envs.registry import env_settings
from scpo.policy import load_policy
from scpo.policy.logprobs import bucketed_batches, pack, response_logprobs
from scpo.train.models import fresh_policy
from scpo.train.sft import encode_demos

REPO = Path(__file__).resolve().parents[1]


def own_forward_logprobs(model, prompts, answers, pad_id):
    """The answer log-probs from the model's own forward pass (every position through every layer)."""
    input_ids, attention, resp, mask = pack(prompts, answers, pad_id)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        logits_to_keep=resp.shape[1] + 1,
        use_cache=False,
    )
    logits = out.logits[:, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, resp[..., None])[..., 0] * mask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--demos", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="4 demonstrations of the test fixtures' games, one round")
    args = ap.parse_args()
    overrides = {"env.name": args.env}
    if args.quick:
        args.demos, args.rounds = 4, 1
        overrides["data.root"] = str(REPO / "tests" / "fixtures")  # its 15 ALFWorld games and WebShop sample
    torch.set_num_threads(1)
    cfg = load_config(REPO / "params.yaml", profile="cpu", overrides=overrides)
    env = env_settings(cfg)
    split = env.package.list_tasks(env.train_split, data_root=env.data_root)
    demos, _ = expert_demonstrations(
        env.package,
        demo_tasks(split, cfg.train.sft.n_demos, cfg.train.seed)[: args.demos],
        data_root=env.data_root,
        max_steps=env.max_steps,
        history_length=env.history_length,
    )
    warm = REPO / "runs" / args.env / "sft" / "seed0" / "model"
    if warm.exists():
        policy, source = load_policy(str(warm)), str(warm)
    else:
        policy = fresh_policy(cfg, env, [d.prompt for d in demos] + [d.response for d in demos])
        source = "a fresh tiny policy"
    model = policy.model.train()
    pad = policy.tokenizer.pad_token_id
    prompts, answers = encode_demos(policy, demos, cfg.policy.max_prompt_tokens)
    lengths = [len(p) + len(a) for p, a in zip(prompts, answers)]
    batches = bucketed_batches(lengths, cfg.train.sft.batch_size, torch.Generator().manual_seed(0))
    passes = {
        "last layer at the answers": lambda p, a: response_logprobs(model, p, a, pad)[0],
        "own forward pass": lambda p, a: own_forward_logprobs(model, p, a, pad),
    }
    times: dict[str, list[float]] = {name: [] for name in passes}
    worst = 0.0
    for r in range(args.rounds):
        order = list(passes) if r % 2 == 0 else list(reversed(passes))
        for name in order:
            t0 = time.perf_counter()
            for idx in batches:
                logp = passes[name]([prompts[i] for i in idx], [answers[i] for i in idx])
                logp.sum().backward()
                model.zero_grad(set_to_none=True)
            times[name].append((time.perf_counter() - t0) / len(batches) * 1e3)
    with torch.no_grad():
        for idx in batches[:10]:
            p, a = [prompts[i] for i in idx], [answers[i] for i in idx]
            worst = max(
                worst,
                float((passes["last layer at the answers"](p, a) - own_forward_logprobs(model, p, a, pad)).abs().max()),
            )
    fast, full = (statistics.median(times[n]) for n in passes)
    print(
        f"{args.env}: {len(demos)} demo steps in {len(batches)} batches of {cfg.train.sft.batch_size}; policy: {source}"
    )
    print(f"  last layer at the answers: {fast:.1f} ms per batch; own forward pass: {full:.1f} ms per batch")
    print(f"  ratio {fast / full:.3f} (median over {args.rounds} rounds); largest log-prob difference {worst:.2e}")


if __name__ == "__main__":
    main()
