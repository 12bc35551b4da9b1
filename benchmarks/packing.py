"""The update's padded layout against its packed one (`scpo.policy.packed`, `train.sequence_layout`) on the gpu
profile's shapes: the token positions each processes, the attention pairs, and CPU time per micro-batch side by side.

    python benchmarks/packing.py [--out benchmarks/results/packing.json] [--rounds 3] [--timed 4] [--scale 0.25]
    python benchmarks/packing.py --quick    # a 2-layer Qwen2 of width 128, 2 micro-batches at 1/16 length, one round

Shapes (`params.yaml`, profile gpu): per environment one iteration's steps, n = n_tasks x group_size x 0.8 max_steps
(`scpo.policy.run_estimate`'s mean episode length), in micro-batches of `train.micro_batch_size` consecutive steps
(`train.minibatch_order: collected`). No rollout of the gpu profile exists to read lengths from, so they are drawn:
prompts log-normal with the run estimate's mean p (ALFWorld 1,000, WebShop 2,000 Qwen2.5 tokens) and a coefficient of
variation of 0.35, cut to [p / 4, max prompt tokens]; answers log-normal with mean a = 200 and CV 0.6, cut to
[8, max_new_tokens]. Counted over the whole iteration:
- real token positions sum_i (P_i + R_i); processed ones: padded B (P_max + R_max) per micro-batch, packed the real;
- attention query-key pairs scored: padded B W^2 (W = P_max + R_max; a padding mask rules out the causal kernel),
  packed with SDPA's block-diagonal mask T^2 (T the row's tokens: the masked pairs are computed too), packed with a
  variable-length kernel (flash attention 2) sum_i L_i (L_i + 1) / 2;
- from those, forward FLOPs per layer at Qwen2.5-1.5B's width (2 x 46.8 M per token for the projections and the MLP,
  4 x 1,536 per scored pair): an estimate, not a GPU measurement.
Timed on the CPU (one thread, float32): a micro-batch's forward (`step_logprobs` with entropy) and backward pass,
padded and packed alternating, on a random Qwen2 of reduced width (`qwen2-cpu`: 4 layers of width 512, the full
151,936-token vocabulary) over the first `--timed` micro-batches of ALFWorld's draw at `--scale` of their lengths;
medians over `--rounds` rounds (a warm-up round untimed) and their ratio, with the largest log-prob difference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LINEAR_FLOPS_PER_TOKEN = 2 * (2 * 1536 * 1536 + 2 * 1536 * 256 + 3 * 1536 * 8960)  # Qwen2.5-1.5B, one layer
ATTENTION_FLOPS_PER_PAIR = 4 * 1536  # q.k and p.v over 12 heads of 128


def draw_lengths(n: int, mean_prompt: int, max_prompt: int, mean_answer: int, max_answer: int, rng) -> np.ndarray:
    """-> [n, 2] (prompt, answer) token counts (module docstring)."""

    def lognormal(mean: float, cv: float, size: int) -> np.ndarray:
        sigma2 = np.log1p(cv**2)
        return rng.lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2), size)

    prompts = np.clip(lognormal(mean_prompt, 0.35, n), mean_prompt / 4, max_prompt).round()
    answers = np.clip(lognormal(mean_answer, 0.6, n), 8, max_answer).round()
    return np.stack([prompts, answers], 1).astype(int)


def count(lengths: np.ndarray, micro: int) -> dict:
    """Token positions, forward passes and attention pairs of the padded and the packed layouts over micro-batches of
    `micro` steps."""
    from scpo.policy.packed import packed_rows

    real = padded = rows = 0
    pairs = {"padded": 0, "packed_rows": 0, "one_row_sdpa": 0, "one_row_varlen": 0}
    for k in range(0, len(lengths), micro):
        mb = lengths[k : k + micro]
        total = mb.sum(1)
        width = int(mb[:, 0].max() + mb[:, 1].max())
        real += int(total.sum())
        padded += len(mb) * width
        groups = packed_rows(total.tolist())
        rows += len(groups)
        pairs["padded"] += len(mb) * width**2
        pairs["packed_rows"] += sum(int(total[g].sum()) ** 2 for g in groups)
        pairs["one_row_sdpa"] += int(total.sum()) ** 2
        pairs["one_row_varlen"] += int((total * (total + 1) // 2).sum())
    tokens = {"padded": padded, "packed_rows": real, "one_row_sdpa": real, "one_row_varlen": real}
    return {
        "steps": len(lengths),
        "micro_batches": -(-len(lengths) // micro),
        "packed_rows": rows,
        "real_tokens": real,
        "processed_padded": padded,
        "processed_packed": real,
        "padding_fraction": 1 - real / padded,
        "attention_pairs": pairs,
        "forward_flops_per_layer_1p5b": {
            k: tokens[k] * LINEAR_FLOPS_PER_TOKEN + pairs[k] * ATTENTION_FLOPS_PER_PAIR for k in pairs
        },
    }


def time_layouts(lengths: np.ndarray, micro: int, shape: str, rounds: int) -> dict:
    """ms per micro-batch (forward + backward) of both layouts, alternating, on a random Qwen2 of `shape`."""
    import torch
    from transformers import Qwen2ForCausalLM

    from scpo.policy.qwen2_shapes import qwen2_config
    from scpo.train.update import StepSample, step_logprobs

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = qwen2_config(shape, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = Qwen2ForCausalLM(config).train()
    gen = torch.Generator().manual_seed(0)

    def ids(n: int) -> list[int]:
        return torch.randint(3, 49152, (int(n),), generator=gen).tolist()

    samples = [StepSample(ids(p), ids(a), 1.0) for p, a in lengths]
    batches = [samples[k : k + micro] for k in range(0, len(samples), micro)]

    def one_round(packed: bool) -> tuple[float, list[torch.Tensor]]:
        start, values = time.perf_counter(), []
        for chunk in batches:
            model.zero_grad(set_to_none=True)
            logp, mask, entropy = step_logprobs(model, chunk, 0, with_entropy=True, packed=packed)
            (logp.sum() + 0.001 * entropy.sum()).backward()
            values.append(logp.detach())
        return (time.perf_counter() - start) * 1e3 / len(batches), values

    times: dict[str, list[float]] = {"padded": [], "packed": []}
    last: dict[str, list] = {}
    for r in range(rounds + 1):  # round 0 warms both up and is not timed
        for name in ("padded", "packed")[:: 1 if r % 2 else -1]:
            ms, last[name] = one_round(name == "packed")
            if r:
                times[name].append(ms)
    diff = max((a - b).abs().max().item() for a, b in zip(last["padded"], last["packed"]))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    return {
        "model": shape,
        "micro_batches": len(batches),
        "rounds": rounds,
        "ms_per_micro_batch": med,
        "packed_over_padded": med["packed"] / med["padded"],
        "largest_logprob_difference": diff,
        "count": count(lengths, micro),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/packing.json")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timed", type=int, default=4, help="micro-batches timed")
    parser.add_argument("--scale", type=float, default=0.25, help="share of the drawn lengths the CPU timing uses")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2-layer width-128 Qwen2, 2 micro-batches, 1/16 length")
    args = parser.parse_args()
    from scpo.config import load_config
    from scpo.policy.run_estimate import H200

    shape = "qwen2-cpu"
    if args.quick:
        args.rounds, args.timed, args.scale, shape = 1, 2, 1 / 16, "qwen2-small"
    rng = np.random.default_rng(args.seed)
    results: dict = {"seed": args.seed, "envs": {}}
    for env in ("alfworld", "webshop"):
        cfg = load_config(ROOT / "params.yaml", profile="gpu", overrides={"env.name": env})
        micro = cfg.train.micro_batch_size
        n = int(cfg.rollout.n_tasks * cfg.rollout.group_size * H200.mean_steps_share * getattr(cfg.env, env).max_steps)
        mean_prompt = dict(H200.prompt_tokens)[env]
        lengths = draw_lengths(
            n, mean_prompt, cfg.policy.max_prompt_tokens, H200.answer_tokens, cfg.policy.max_new_tokens, rng
        )
        c = count(lengths, micro)
        results["envs"][env] = {"micro_batch_size": micro, "group_size": cfg.rollout.group_size, **c}
        print(
            f"{env}: {c['steps']} steps in {c['micro_batches']} micro-batches of {micro} (group size "
            f"{cfg.rollout.group_size}; prompts mean {lengths[:, 0].mean():.0f} tokens, at most "
            f"{cfg.policy.max_prompt_tokens}; answers mean {lengths[:, 1].mean():.0f}, at most "
            f"{cfg.policy.max_new_tokens})"
        )
        print(
            f"  token positions: real {c['real_tokens']:,}, processed padded {c['processed_padded']:,} "
            f"(padding fraction {c['padding_fraction']:.3f}), packed {c['processed_packed']:,}; "
            f"padded / packed {c['processed_padded'] / c['processed_packed']:.2f}x"
        )
        pairs, flops = c["attention_pairs"], c["forward_flops_per_layer_1p5b"]
        print(
            f"  packed rows: {c['packed_rows']} forward passes ({c['packed_rows'] / c['micro_batches']:.1f} per "
            f"micro-batch, each at most its longest sequence)"
        )
        for name, what in (
            ("packed_rows", "packed rows (SDPA)"),
            ("one_row_sdpa", "one row per micro-batch, SDPA's block-diagonal mask"),
            ("one_row_varlen", "one row per micro-batch, a variable-length kernel"),
        ):
            print(
                f"  {what}: attention pairs / padded {pairs[name] / pairs['padded']:.2f}, estimated forward FLOPs "
                f"at 1.5B width / padded {flops[name] / flops['padded']:.2f}"
            )
        if env == "alfworld":
            timed = np.maximum((lengths[: args.timed * micro] * args.scale).round().astype(int), 1)
    t = time_layouts(timed, micro, shape, args.rounds)
    results["cpu_timing"] = {"env": "alfworld", "scale": args.scale, "threads": 1, "dtype": "float32", **t}
    tc = t["count"]
    print(
        f"CPU, {shape} (random weights, float32, one thread), {t['micro_batches']} ALFWorld micro-batches at "
        f"{args.scale:g} x length (padding fraction {tc['padding_fraction']:.3f}), median of {t['rounds']} rounds: "
        f"forward + backward ms per micro-batch padded {t['ms_per_micro_batch']['padded']:.0f}, packed "
        f"{t['ms_per_micro_batch']['packed']:.0f}; packed / padded {t['packed_over_padded']:.2f}; "
        f"largest log-prob difference {t['largest_logprob_difference']:.1e}"
    )
    if args.quick:
        print("--quick: nothing written")
        return
    out = ROOT / args.out
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
