"""One RL iteration of the real SmolLM2-135M-Instruct (packaged GGUF -> safetensors) on ALFWorld, end to end on CPU.

    python experiments/smollm2_rl_iteration/smollm2_rl_iteration.py [--method gigpo] [--group-size 2] [--max-steps 2]

The update runs even when every rollout failed (`train.skip_zero_advantage` is off here), so the smoke covers the whole
iteration: rollouts, credit, the clipped loss with KL and entropy, and the optimizer step.

Prints the run summary: success, invalid rate, losses and wall seconds split env / generation / credit / update.
Too slow for CI (a 135M model, ~600-token prompts, on 2 cores); a smoke check that the non-tiny code path works.
"""

from __future__ import annotations

import argparse
import json
import time

from scpo.config import load_config
from scpo.train.run import run_training


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", default="gigpo")
    ap.add_argument("--group-size", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=2)
    ap.add_argument("--out", default="runs/bench/smollm2")
    args = ap.parse_args()
    cfg = load_config(
        "params.yaml",
        profile="cpu",
        overrides={
            "policy.profile": "smollm2-135m",
            "policy.max_prompt_tokens": 1024,
            "policy.max_new_tokens": 48,
            "rollout.n_tasks": 1,
            "rollout.group_size": args.group_size,
            "env.alfworld.max_steps": args.max_steps,
            "train.iterations": 1,
            "train.minibatch_size": 4,
            "train.lr": 1e-6,
            "credit.method": args.method,
            "train.init_from": None,
            "train.skip_zero_advantage": False,
        },
    )
    t0 = time.perf_counter()
    summary = run_training(cfg, stage="rl", out_dir=args.out)
    print(
        json.dumps(
            {
                "wall_s": time.perf_counter() - t0,
                "final": summary["final"],
                "seconds_per_iteration": summary["seconds_per_iteration"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
