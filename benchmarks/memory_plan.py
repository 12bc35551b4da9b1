"""The memory plan's estimate (`scpo.policy.memory_plan`) against the memory an RL update of a small random Qwen2
measures on the CPU, side by side.

    python benchmarks/memory_plan.py [--out benchmarks/results/memory_plan.json] [--dtype bfloat16] [--no-checkpointing]
    python benchmarks/memory_plan.py --quick    # the bfloat16 case on 2 steps of 16 + 8 tokens, nothing written

One process per measured case (a fresh allocator): a Qwen2 of the paper's architecture (`scpo.policy.qwen2_shapes`,
shape `qwen2-cpu`, random weights), float32 trained weights with forward passes under bf16 autocast (as the gpu
profile), the KL reference in policy.dtype, AdamW, then `ppo_update` (two minibatches so AdamW's state exists while the
second one runs) on steps of max_prompt_tokens + max_new_tokens tokens. Measured: the process's peak resident set size
(ru_maxrss) minus its resident size just before the model is built (/proc/self/statm), so allocator overhead and
fragmentation count against the estimate. Compared: the plan's trainer and update terms (no rollout engine runs here).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {"micro_batch": 4, "prompt": 192, "answer": 64}


def _config(dtype: str, checkpointing: bool, sizes: dict):
    from scpo.config import load_config

    return load_config(
        None,
        overrides={
            "policy.dtype": dtype,
            "policy.max_prompt_tokens": sizes["prompt"],
            "policy.max_new_tokens": sizes["answer"],
            "train.micro_batch_size": sizes["micro_batch"],
            "train.minibatch_size": 2 * sizes["micro_batch"],
            "train.minibatch_order": "collected",
            "train.gradient_checkpointing": checkpointing,
            "train.lr": 1e-5,
        },
    )


def measure(dtype: str, checkpointing: bool, sizes: dict) -> dict:
    """Build, update, measure (in this process); -> bytes measured and estimated."""
    import torch

    from scpo.policy.memory_plan import model_shape, plan_memory
    from scpo.policy.placement import autocast_each_forward
    from scpo.policy.profiles import enable_gradient_checkpointing
    from scpo.policy.qwen2_shapes import qwen2_config
    from scpo.train.update import StepSample, make_optimizer, ppo_update

    torch.set_num_threads(2)
    cfg = _config(dtype, checkpointing, sizes)
    config = qwen2_config("qwen2-cpu")
    from transformers import Qwen2ForCausalLM

    gen = torch.Generator().manual_seed(0)
    n = 2 * sizes["micro_batch"]
    samples = [
        StepSample(
            torch.randint(0, config.vocab_size, (sizes["prompt"],), generator=gen).tolist(),
            torch.randint(0, config.vocab_size, (sizes["answer"],), generator=gen).tolist(),
            float(i % 3 - 1),
        )
        for i in range(n)
    ]
    rss0 = _resident_bytes()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    if checkpointing:
        enable_gradient_checkpointing(model)
    reference = Qwen2ForCausalLM(config).to(getattr(torch, dtype)).eval().requires_grad_(False)
    autocast_each_forward(model, torch.device("cpu"), dtype)
    optimizer = make_optimizer(model, cfg.train)
    ppo_update(model, reference, optimizer, samples, pad_id=0, train_cfg=cfg.train, progress=False)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    plan = plan_memory(cfg, model_shape(config), device="CPU")
    estimate = sum(plan.trainer.values()) + sum(plan.update.values())
    return {
        "dtype": dtype,
        "gradient_checkpointing": checkpointing,
        "sizes": sizes,
        "params": model_shape(config).params,
        "measured_peak_rss_growth": rss,
        "estimate": estimate,
        "estimate_terms": {**plan.trainer, **plan.update},
        "estimate_over_measured": estimate / rss,
    }


def _resident_bytes() -> int:
    """The process's resident set size now (Linux /proc/self/statm)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/memory_plan.json"))
    ap.add_argument("--case", help=argparse.SUPPRESS)  # internal: one case in this process
    ap.add_argument("--micro-batch", type=int, default=SIZES["micro_batch"])
    ap.add_argument("--prompt", type=int, default=SIZES["prompt"])
    ap.add_argument("--answer", type=int, default=SIZES["answer"])
    ap.add_argument(
        "--quick", action="store_true", help="one case (bfloat16) of 2 steps of 16 + 8 tokens; writes nothing"
    )
    args = ap.parse_args()
    if args.quick:
        args.micro_batch, args.prompt, args.answer = 1, 16, 8
    sizes = {"micro_batch": args.micro_batch, "prompt": args.prompt, "answer": args.answer}
    if args.case:
        dtype, ckpt = args.case.split(":")
        print(json.dumps(measure(dtype, ckpt == "1", sizes)))
        return
    rows = []
    for case in ("bfloat16:0",) if args.quick else ("bfloat16:0", "bfloat16:1", "float32:0"):
        done = subprocess.run(
            [sys.executable, __file__, "--case", case, *(f"--{k.replace('_', '-')}={v}" for k, v in sizes.items())],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for r in rows:
        print(
            f"{r['dtype']:>9} checkpointing={r['gradient_checkpointing']!s:5}"
            f"  estimate {r['estimate'] / 2**20:7.1f} MiB"
            f"  measured peak RSS growth {r['measured_peak_rss_growth'] / 2**20:7.1f} MiB"
            f"  estimate / measured {r['estimate_over_measured']:.2f}"
        )
    if args.quick:
        print("--quick: a check that the benchmark runs, nothing written")
        return
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
